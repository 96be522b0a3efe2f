// Argument checks every Device backend runs before it touches memory, so CPU
// and CUDA reject the same calls with the same INVALID_ARGUMENT text.
// Header-only: the CUDA target uses them without linking the CPU one.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/dtype.h"
#include "worker/optim/adamw.h"

namespace zeroshard::device_internal {

inline absl::Status CheckCount(const char* op, int64_t n) {
  if (n >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(op, ": negative size ", n));
}

inline absl::Status CheckDType(const char* op, DType dtype) {
  if (dtype == DType::kFp32 || dtype == DType::kBf16) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": dtype must be fp32 or bf16, got ", DTypeName(dtype)));
}

inline absl::Status CheckTwoDTypes(const char* op, DType a, DType b, int64_t n) {
  if (absl::Status s = CheckDType(op, a); !s.ok()) return s;
  if (absl::Status s = CheckDType(op, b); !s.ok()) return s;
  return CheckCount(op, n);
}

inline absl::Status CheckAdamW(int64_t step, const AdamWShard& shard) {
  if (step < 1) return absl::InvalidArgumentError(absl::StrCat("AdamW: step ", step, " < 1"));
  if (absl::Status s = CheckDType("AdamW", shard.compute_dtype); !s.ok()) return s;
  return CheckCount("AdamW", shard.n);
}

}  // namespace zeroshard::device_internal
