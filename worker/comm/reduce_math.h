// Element conversions and reductions shared by the CPU collectives.
// bf16 reductions convert to fp32, reduce in fp32 and round once at the end
// (common/dtype.h rounding: nearest even), so a bf16 result does not depend on
// the ring order beyond fp32 summation order.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/dtype.h"
#include "worker/comm/communicator.h"

namespace zeroshard {

// Whether `dtype` is a control values' dtype (int64, fp64): reduced in its
// own type, in rank order (FoldInRankOrder), never on the data plane.
constexpr bool IsControlDType(DType dtype) {
  return dtype == DType::kInt64 || dtype == DType::kFp64;
}

// OK for fp32 and bf16 (data-plane dtypes) and, with `control_dtypes`, for
// int64 and fp64 too (control values: AllReduce); INVALID_ARGUMENT naming
// `field` otherwise.
absl::Status CheckCommDType(DType dtype, const char* field, bool control_dtypes = false);

// OK when count >= 0 and, for count > 0, both buffers are non-null;
// INVALID_ARGUMENT otherwise.
absl::Status CheckCommBuffers(const void* send, const void* recv, int64_t count);

// OK for a non-empty group whose members each pass CheckCommBuffers;
// INVALID_ARGUMENT naming the member otherwise.
absl::Status CheckCommGroup(absl::Span<const CollectiveArgs> group);
// A group's stats bytes (CommOpStats::bytes): every member's full
// world_size x count buffer of `dtype`.
int64_t GroupStatsBytes(absl::Span<const CollectiveArgs> group, DType dtype, int world_size);

// OK for 0 <= root < world_size, and buffers as CheckCommBuffers where only
// the root reads send (others may pass null); INVALID_ARGUMENT otherwise.
absl::Status CheckBroadcastArgs(const void* send, const void* recv, int64_t count, int root,
                                int rank, int world_size);
// OK for world_size >= 1 and 0 <= rank < world_size (a communicator's
// creation); INVALID_ARGUMENT otherwise.
absl::Status CheckRankAndWorldSize(int rank, int world_size);

// dst[i] = float(src[i]); src holds n elements of `dtype` (fp32 or bf16).
void ToFloat(const void* src, DType dtype, float* dst, int64_t n);
// dst[i] = dtype(src[i]), rounding to nearest even for bf16.
void FromFloat(const float* src, DType dtype, void* dst, int64_t n);
// out[i] = op(a[i], b[i]); out may be a or b (the same pointer, not a shifted
// overlap).
void Combine(float* out, const float* a, const float* b, int64_t n, ReduceOp op);

// Control values (int64 or fp64, `dtype`), count per rank, folded in rank
// order: out[i] = op(...op(blocks[0][i], blocks[1][i])..., blocks[N-1][i]).
// Every rank folding the same blocks gets the same bits, whatever the
// transport's order. `out` may be one of the blocks (the same pointer).
void FoldInRankOrder(absl::Span<const void* const> blocks, int64_t count, DType dtype, ReduceOp op,
                     void* out);

}  // namespace zeroshard
