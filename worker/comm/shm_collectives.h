// The shm backend's collectives as rounds of ShmGroup (shm_group.h). Buffers,
// counts and the in-place rules are communicator.h's; each function runs the
// whole op on the calling thread and returns the first wait's error.
//
// Every element's reduction runs over ranks 0, 1, ..., N-1 in that order, in
// fp32 (bf16 converted on the way into the slot, rounded once at the end;
// int64 and fp64 in their own type), so every rank gets the same bits and
// the result does not depend on timing. Slot use per round:
//   AllGather, Broadcast, RingShift: slot_bytes of the payload (a group's
//     members back to back).
//   ReduceScatter: N blocks of slot_bytes / (4N) fp32 elements (a group's
//     members back to back in each block).
//   AllReduce, fp32/bf16: counts up to kShmOneRoundElements in one round
//     (every rank reduces all of it); larger ones in chunks of slot_bytes / 4
//     elements, two rounds each (rank r reduces the r-th of N segments, then
//     every rank copies every segment): 2 (N-1)/N of the data read per rank
//     instead of N-1 times it.
//   AllReduce, int64/fp64: one round per slot_bytes / 8 elements.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/dtype.h"
#include "worker/comm/communicator.h"
#include "worker/comm/shm_group.h"

namespace zeroshard {

inline constexpr int64_t kShmOneRoundElements = 16384;

// Scratch reused across ops (only grows).
struct ShmScratch {
  std::vector<float> acc;
};

// Grouped (communicator.h AllGatherGroup / ReduceScatterGroup): the
// members' per-rank pieces are laid end to end and moved in shared rounds,
// so small members share one meeting; a single op is a group of one.
absl::Status ShmAllGatherGroup(ShmGroup& g, absl::Span<const CollectiveArgs> group,
                               size_t elem_bytes, absl::Time deadline);
absl::Status ShmReduceScatterGroup(ShmGroup& g, absl::Span<const CollectiveArgs> group, DType dtype,
                                   ReduceOp op, ShmScratch& scratch, absl::Time deadline);
absl::Status ShmAllReduce(ShmGroup& g, const void* send, void* recv, int64_t count, DType dtype,
                          ReduceOp op, ShmScratch& scratch, absl::Time deadline);
absl::Status ShmBroadcast(ShmGroup& g, const void* send, void* recv, size_t bytes, int root,
                          absl::Time deadline);
absl::Status ShmRingShift(ShmGroup& g, const void* send, void* recv, size_t bytes,
                          absl::Time deadline);
absl::Status ShmBarrier(ShmGroup& g, absl::Time deadline);

}  // namespace zeroshard
