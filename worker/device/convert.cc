#include "worker/device/convert.h"

#include <cstring>

#include "common/status_macros.h"
#include "worker/optim/adamw.h"

namespace zeroshard {

void Bf16ToFp32(const bf16* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = Bf16ToFloat(src[i]);
}

void Fp32ToBf16(const float* src, bf16* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = FloatToBf16(src[i]);
}

void ToFp32(const void* src, DType dtype, float* dst, int64_t n) {
  ZS_CHECK(dtype == DType::kFp32 || dtype == DType::kBf16);
  if (dtype == DType::kFp32) {
    if (src != dst) std::memcpy(dst, src, static_cast<size_t>(n) * 4);
  } else {
    Bf16ToFp32(static_cast<const bf16*>(src), dst, n);
  }
}

void FromFp32(const float* src, DType dtype, void* dst, int64_t n) {
  ZS_CHECK(dtype == DType::kFp32 || dtype == DType::kBf16);
  if (dtype == DType::kFp32) {
    if (src != dst) std::memcpy(dst, src, static_cast<size_t>(n) * 4);
  } else {
    Fp32ToBf16(src, static_cast<bf16*>(dst), n);
  }
}

void AddInto(void* acc, const void* x, DType dtype, int64_t n) {
  ZS_CHECK(dtype == DType::kFp32 || dtype == DType::kBf16);
  if (dtype == DType::kFp32) {
    float* a = static_cast<float*>(acc);
    const float* b = static_cast<const float*>(x);
    for (int64_t i = 0; i < n; ++i) a[i] += b[i];
  } else {
    bf16* a = static_cast<bf16*>(acc);
    const bf16* b = static_cast<const bf16*>(x);
    for (int64_t i = 0; i < n; ++i) a[i] = FloatToBf16(Bf16ToFloat(a[i]) + Bf16ToFloat(b[i]));
  }
}

void AddFp32Into(void* acc, DType dtype, const float* x, int64_t n) {
  ZS_CHECK(dtype == DType::kFp32 || dtype == DType::kBf16);
  if (dtype == DType::kFp32) {
    float* a = static_cast<float*>(acc);
    for (int64_t i = 0; i < n; ++i) a[i] += x[i];
  } else {
    bf16* a = static_cast<bf16*>(acc);
    for (int64_t i = 0; i < n; ++i) a[i] = FloatToBf16(Bf16ToFloat(a[i]) + x[i]);
  }
}

double SumSquares(const void* x, DType dtype, int64_t n) {
  ZS_CHECK(dtype == DType::kFp32 || dtype == DType::kBf16);
  if (dtype == DType::kFp32) return SumSquaresCpu(static_cast<const float*>(x), n);
  const bf16* h = static_cast<const bf16*>(x);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double f = Bf16ToFloat(h[i]);
    sum += f * f;
  }
  return sum;
}

}  // namespace zeroshard
