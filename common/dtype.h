// Element types and their conversions.
// bf16 is the upper half of an IEEE binary32; conversion rounds to nearest
// even (as CUDA's __float2bfloat16_rn does). NaN stays NaN.
#pragma once

#include <cstdint>
#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace zeroshard {

// kFp32, kBf16 and kFp16 are parameter, compute and reduce dtypes (their
// values match proto DType). kInt64 and kFp64 are for control collectives
// only (a step number, a loss sum, a squared norm): they never appear in a
// shard plan or on the wire as a tensor dtype.
enum class DType : int { kFp32 = 1, kBf16 = 2, kFp16 = 3, kInt64 = 4, kFp64 = 5 };

// Bytes per element.
constexpr int64_t DTypeSize(DType d) {
  switch (d) {
    case DType::kBf16:
    case DType::kFp16:
      return 2;
    case DType::kInt64:
    case DType::kFp64:
      return 8;
    case DType::kFp32:
      break;
  }
  return 4;
}
absl::string_view DTypeName(DType d);  // "fp32", "bf16", "fp16", "int64", "fp64"
// Parses a tensor dtype name: fp32, bf16 or fp16 (INVALID_ARGUMENT otherwise).
absl::StatusOr<DType> ParseDType(absl::string_view name);

using bf16 = uint16_t;  // Storage type of one bfloat16 value.

inline bf16 FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<bf16>(u >> 16);
}

inline float Bf16ToFloat(bf16 h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace zeroshard
