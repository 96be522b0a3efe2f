// The Gloo contexts a communicator's rings send over, one per direction
// where that helps.
//
// At world size 2 a rank's next and previous ranks are the same peer, so a
// ring on one context carries both directions over one TCP connection: one
// Gloo event-loop thread per rank then reads it and writes what the
// sending thread could not, and both directions share the socket's lock.
// The communicator connects a second context there ("reverse": its own
// device, loop thread and connection), and messages from the higher rank to
// the lower travel on it, so each connection carries one direction, as the
// loopback limit's streams in bench/comm do. Measured with Gloo alone in two
// processes (1 MiB messages, all receives posted first, medians of 7, 3
// alternating rounds): 32 MiB each way 1.98-2.45 GB/s on one context,
// 2.43-3.04 on two; 128 MiB 2.54-2.62 against 2.73-3.08. Two contexts on one
// shared device (one loop thread) gained little: 2.31-2.55 / 2.53-2.62.
// From world size 3 on next and previous differ, every pair carries one
// direction of the ring already, and there is no second context.
//
// Thread safety: immutable after construction; Gloo contexts are used from
// the communicator's queue thread (and Abort from any thread).
#pragma once

#include <memory>

#include "gloo/context.h"

namespace zeroshard {

struct GlooLinks {
  std::shared_ptr<gloo::Context> main;     // Every pair.
  std::shared_ptr<gloo::Context> reverse;  // Null, or messages from a higher rank to a lower.

  // The context whose pair carries messages from rank `from` to rank `to`:
  // the same answer on both ends.
  const std::shared_ptr<gloo::Context>& Edge(int from, int to) const {
    return reverse != nullptr && from > to ? reverse : main;
  }
  int rank() const { return main->rank; }
  int size() const { return main->size; }
};

}  // namespace zeroshard
