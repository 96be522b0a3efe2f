// All-reduce over zeroshard's rings, replacing gloo::allreduce so that Abort
// always wakes a rank waiting on a dead or stalled peer (the rings register
// their waits in PendingWaits; see gloo_ring_broadcast.h for what Gloo's own
// error path misses).
// - fp32 / bf16 data: the ring reduce-scatter, then the ring all-gather, as
//   NCCL's ring all-reduce is built (Patarasuk & Yuan, "Bandwidth optimal
//   all-reduce algorithms for clusters of workstations", 2009, section 3).
// - int64 / fp64 control values (a loss, a squared norm, a step: a few
//   elements): every rank's values all-gathered, then folded in rank order
//   (FoldInRankOrder), so every rank gets the same bits.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/dtype.h"
#include "worker/comm/communicator.h"
#include "worker/comm/gloo_links.h"
#include "worker/comm/gloo_ring_reduce_scatter.h"
#include "worker/comm/gloo_transport.h"

namespace zeroshard {

struct RingAllReduceArgs {
  const void* send = nullptr;  // count elements of dtype.
  void* recv = nullptr;        // count elements of dtype; may equal send.
  int64_t count = 0;
  // fp32 or bf16 (reduced in fp32, rounded once); int64 or fp64 (in their own type).
  DType dtype = DType::kFp32;
  ReduceOp op = ReduceOp::kSum;
  uint64_t reduce_scatter_slot = 0;  // Each ring's slots, as their Args say.
  uint64_t all_gather_slot = 0;
  std::chrono::milliseconds timeout{60000};  // Per ring.
  PendingWaits* waits = nullptr;
};

// Scratch reused across ops (only grows): the reduce-scatter ring's, and
// a buffer padded to a multiple of world_size elements when count is not one
// (control values: the world_size x count gathered values).
struct RingAllReduceScratch {
  RingScratch ring;
  std::vector<char> padded;
};

// Runs the rings over `links`; every rank ends with the same bits. Throws
// gloo::IoException on transport failure, abort or timeout. Memory: the
// reduce-scatter's scratch for count / world_size elements, plus a padded
// copy of the data where count % world_size != 0; control values:
// world_size x count elements.
void RingAllReduce(const GlooLinks& links, const RingAllReduceArgs& args,
                   RingAllReduceScratch& scratch);

}  // namespace zeroshard
