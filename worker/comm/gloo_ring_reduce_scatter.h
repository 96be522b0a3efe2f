// Ring reduce-scatter built from Gloo primitives (unbound-buffer send/recv).
// The packaged Gloo (2022 snapshot) has no usable reduce-scatter: its only one
// is the in-place ReduceScatterHalvingDoubling<T> with an int count and no
// bf16, so zeroshard builds the ring itself, as NCCL and Gloo's ring
// all-reduce do for their reduce-scatter phase.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "common/dtype.h"
#include "worker/comm/communicator.h"
#include "worker/comm/gloo_links.h"
#include "worker/comm/gloo_transport.h"

namespace zeroshard {

// Scratch reused across ops (only grows), so a steady stream of equal-sized
// reduce-scatters does not fault in fresh pages every time.
struct RingScratch {
  std::vector<float> outgoing, incoming, own;
};

struct RingReduceScatterArgs {
  const void* send = nullptr;  // world_size * count elements of dtype.
  void* recv = nullptr;        // count elements of dtype; may be send + rank*count.
  int64_t count = 0;           // Elements per rank.
  DType dtype = DType::kFp32;  // fp32 or bf16 (reduced in fp32, rounded once).
  ReduceOp op = ReduceOp::kSum;
  uint64_t slot = 0;                         // Unique per op and equal on every rank.
  std::chrono::milliseconds timeout{60000};  // Whole-op deadline.
  PendingWaits* waits = nullptr;             // Abort wakes the ring's waits (may be null).
};

// Runs the ring over `links` (sends to next on links.Edge(rank, next)).
// Throws gloo::IoException on transport failure or
// timeout (the caller maps exceptions to absl::Status); returns OK otherwise.
// Memory: `scratch` grows to two fp32 blocks of `count` elements (three for
// bf16) and keeps them.
void RingReduceScatter(const GlooLinks& links, const RingReduceScatterArgs& args,
                       RingScratch& scratch);

// Ring shift (Communicator::RingShift): `bytes` from `send` to rank - 1,
// rank + 1's into `recv`, as one unbound-buffer message tagged `slot`.
// Throws gloo::IoException on transport failure or timeout.
// `waits` (may be null): Abort wakes this shift's waits through it.
void RingShiftBytes(const GlooLinks& links, const void* send, void* recv, size_t bytes,
                    uint64_t slot, std::chrono::milliseconds timeout,
                    PendingWaits* waits = nullptr);

}  // namespace zeroshard
