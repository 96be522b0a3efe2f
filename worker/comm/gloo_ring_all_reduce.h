// Ring all-reduce of fp32 / bf16 data: zeroshard's ring reduce-scatter, then
// its ring all-gather, as NCCL's ring all-reduce is built (Patarasuk & Yuan,
// "Bandwidth optimal all-reduce algorithms for clusters of workstations",
// 2009, section 3). It replaces gloo::allreduce for these dtypes so that
// Abort always wakes a rank waiting on a dead peer (both rings register
// their waits in PendingWaits); int64 / fp64 control values stay on
// gloo::allreduce (a few elements, bounded by their own short timeout).
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
  DType dtype = DType::kFp32;  // fp32 or bf16 (reduced in fp32, rounded once).
  ReduceOp op = ReduceOp::kSum;
  uint64_t reduce_scatter_slot = 0;  // Each ring's slots, as their Args say.
  uint64_t all_gather_slot = 0;
  std::chrono::milliseconds timeout{60000};  // Per ring.
  PendingWaits* waits = nullptr;
};

// Scratch reused across ops (only grows): the reduce-scatter ring's, and
// a buffer padded to a multiple of world_size elements when count is not one.
struct RingAllReduceScratch {
  RingScratch ring;
  std::vector<char> padded;
};

// Runs both rings over `links`; every rank ends with the same bits. Throws
// gloo::IoException on transport failure, abort or timeout. Memory: the
// reduce-scatter's scratch for count / world_size elements, plus a padded
// copy of the data where count % world_size != 0.
void RingAllReduce(const GlooLinks& links, const RingAllReduceArgs& args,
                   RingAllReduceScratch& scratch);

}  // namespace zeroshard
