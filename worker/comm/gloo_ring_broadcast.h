// Pipelined chain broadcast built from Gloo primitives (unbound-buffer
// send/recv). It replaces gloo::broadcast so that Abort always wakes it:
// its waits are registered in PendingWaits. Gloo's own pair-level error path
// does not reach a send whose bytes are being written (an unbound buffer's
// op in the pair's transmit queue), so a gloo::broadcast writing to a peer
// that stopped reading stayed blocked after Abort until its own timeout,
// and the communicator's destructor joined it
// (comm_multiprocess_test's AbortReturnsPromptlyWithAPeerStoppedMidBroadcast).
//
// Ranks form a chain from the root: root, root + 1, ..., root + N - 1 (mod
// N). Each passes every segment (kRingSegmentBytes) on as soon as it lands,
// so the N - 1 hops overlap: a broadcast of B bytes takes about
// B / bandwidth + (N - 2) segments' time, where a binomial tree takes
// log2(N) * B / bandwidth (the pipelined chain of NCCL's ring broadcast).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "worker/comm/gloo_links.h"
#include "worker/comm/gloo_transport.h"

namespace zeroshard {

struct RingBroadcastArgs {
  void* data = nullptr;  // `bytes` bytes: the root's are sent, the others' written.
  size_t bytes = 0;
  int root = 0;  // 0 <= root < world size.
  // The op's first slot: it uses RingSegments(bytes) consecutive slots from
  // here. Unique per op and equal on every rank.
  uint64_t slot = 0;
  std::chrono::milliseconds timeout{60000};  // Whole-op deadline.
  PendingWaits* waits = nullptr;             // Abort wakes the chain's waits (may be null).
};

// Runs the chain over `links`. Throws gloo::IoException on transport
// failure, abort or timeout (the caller maps exceptions to absl::Status).
// Allocates nothing beyond Gloo's per-message bookkeeping.
void RingBroadcast(const GlooLinks& links, const RingBroadcastArgs& args);

}  // namespace zeroshard
