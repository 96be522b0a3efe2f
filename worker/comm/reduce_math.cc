#include "worker/comm/reduce_math.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace zeroshard {

absl::Status CheckCommDType(DType dtype, const char* field, bool control_dtypes) {
  if (dtype == DType::kFp32 || dtype == DType::kBf16) return absl::OkStatus();
  if (control_dtypes && IsControlDType(dtype)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(field, ": dtype ", static_cast<int>(dtype),
                                                 " is not supported (fp32 = 1, bf16 = 2",
                                                 control_dtypes ? ", int64 = 4, fp64 = 5)" : ")"));
}

absl::Status CheckCommBuffers(const void* send, const void* recv, int64_t count) {
  if (count < 0) return absl::InvalidArgumentError(absl::StrCat("count must be >= 0, got ", count));
  if (count > 0 && (send == nullptr || recv == nullptr)) {
    return absl::InvalidArgumentError("send and recv must be non-null when count > 0");
  }
  return absl::OkStatus();
}

absl::Status CheckCommGroup(absl::Span<const CollectiveArgs> group) {
  if (group.empty()) return absl::InvalidArgumentError("a grouped collective needs a member");
  for (size_t i = 0; i < group.size(); ++i) {
    if (absl::Status s = CheckCommBuffers(group[i].send, group[i].recv, group[i].count); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("group member ", i, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

int64_t GroupStatsBytes(absl::Span<const CollectiveArgs> group, DType dtype, int world_size) {
  int64_t bytes = 0;
  for (const CollectiveArgs& a : group) bytes += a.count * DTypeSize(dtype) * world_size;
  return bytes;
}

absl::Status CheckBroadcastArgs(const void* send, const void* recv, int64_t count, int root,
                                int rank, int world_size) {
  if (root < 0 || root >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("broadcast root ", root, " outside [0, ", world_size, ")"));
  }
  return CheckCommBuffers(rank == root ? send : recv, recv, count);
}

absl::Status CheckRankAndWorldSize(int rank, int world_size) {
  if (world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("world_size must be >= 1, got ", world_size));
  }
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " outside [0, ", world_size, ")"));
  }
  return absl::OkStatus();
}

void ToFloat(const void* src, DType dtype, float* dst, int64_t n) {
  if (dtype == DType::kFp32) {
    if (src != dst) std::memmove(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  const bf16* in = static_cast<const bf16*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFloat(in[i]);
}

void FromFloat(const float* src, DType dtype, void* dst, int64_t n) {
  if (dtype == DType::kFp32) {
    if (src != dst) std::memmove(dst, src, static_cast<size_t>(n) * sizeof(float));
    return;
  }
  bf16* out = static_cast<bf16*>(dst);
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToBf16(src[i]);
}

void Combine(float* out, const float* a, const float* b, int64_t n, ReduceOp op) {
  if (op == ReduceOp::kSum) {
    for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = std::max(a[i], b[i]);
  }
}

namespace {

template <typename T>
void FoldTyped(absl::Span<const void* const> blocks, int64_t count, ReduceOp op, T* out) {
  for (int64_t i = 0; i < count; ++i) {
    T acc = static_cast<const T*>(blocks[0])[i];
    for (size_t q = 1; q < blocks.size(); ++q) {
      const T v = static_cast<const T*>(blocks[q])[i];
      acc = op == ReduceOp::kSum ? acc + v : std::max(acc, v);
    }
    out[i] = acc;
  }
}

}  // namespace

void FoldInRankOrder(absl::Span<const void* const> blocks, int64_t count, DType dtype, ReduceOp op,
                     void* out) {
  if (dtype == DType::kInt64) {
    FoldTyped(blocks, count, op, static_cast<int64_t*>(out));
  } else {
    FoldTyped(blocks, count, op, static_cast<double*>(out));
  }
}

}  // namespace zeroshard
