// Element types and their conversions.
// bf16 is the upper half of an IEEE binary32; conversion rounds to nearest
// even (as CUDA's __float2bfloat16_rn does). NaN stays NaN.
#pragma once

#include <cstdint>
#include <cstring>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace zeroshard {

enum class DType : int { kFp32 = 1, kBf16 = 2, kFp16 = 3 };

// Bytes per element.
constexpr int64_t DTypeSize(DType d) { return d == DType::kFp32 ? 4 : 2; }
absl::string_view DTypeName(DType d);  // "fp32", "bf16", "fp16"
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
