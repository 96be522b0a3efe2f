// Ring all-gather built from Gloo primitives (unbound-buffer send/recv),
// pipelined by segment. It replaces gloo::allgather for two reasons:
// - Abort: its waits are registered in PendingWaits, so Abort always wakes
//   them. A gloo::allgather waiting on a peer that died could stay blocked
//   until its own timeout ([Note: aborting a Gloo context] does not always
//   reach it), and the communicator's destructor joins that wait: a survivor
//   then missed the next generation (seen in elastic_redundancy_test under
//   CI's load).
// - Bandwidth: a block travels as 1 MiB segments, and a rank forwards each
//   segment as soon as it lands, so the N - 1 steps overlap instead of each
//   waiting for the whole block (the pipelined ring of NCCL's all-gather).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "worker/comm/gloo_links.h"
#include "worker/comm/gloo_transport.h"

namespace zeroshard {

struct RingAllGatherArgs {
  // world_size blocks of `block_bytes`; the others' blocks are written here.
  void* out = nullptr;
  size_t block_bytes = 0;
  // This rank's block. Null, or out + rank * block_bytes: it is already in
  // place. Apart from `out`, it is sent from here and copied to its place
  // while the first messages are on the wire (the copy then costs no time
  // where the transfer leaves a core idle); overlapping `out` elsewhere, it
  // is copied first and sent from its place. Only read.
  const void* own = nullptr;
  // The op's first slot: it uses (world_size - 1) * RingSegments(block_bytes)
  // consecutive slots from here. Unique per op and equal on every rank.
  uint64_t slot = 0;
  std::chrono::milliseconds timeout{60000};  // Whole-op deadline.
  PendingWaits* waits = nullptr;             // Abort wakes the ring's waits (may be null).
};

// Runs the ring over `links` (sends to next on links.Edge(rank, next)).
// Throws gloo::IoException on transport failure,
// abort or timeout (the caller maps exceptions to absl::Status). Allocates
// nothing beyond Gloo's per-message bookkeeping.
void RingAllGather(const GlooLinks& links, const RingAllGatherArgs& args);

}  // namespace zeroshard
