// Element conversions and accumulations between fp32 and bf16 buffers, as
// the engine moves gradients and parameters between compute, reduce and
// master dtypes. bf16 rounding is common/dtype.h's (nearest even). Plain
// loops the compiler vectorises; `n` in elements. Thread safety: pure.
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace zeroshard {

void Bf16ToFp32(const bf16* src, float* dst, int64_t n);
void Fp32ToBf16(const float* src, bf16* dst, int64_t n);
// Converts n elements of `dtype` (fp32 or bf16) at src into fp32 at dst.
void ToFp32(const void* src, DType dtype, float* dst, int64_t n);
// Converts fp32 src into n elements of `dtype` at dst (memcpy for fp32).
void FromFp32(const float* src, DType dtype, void* dst, int64_t n);
// acc[i] += x[i], both of `dtype`; bf16 sums in fp32 and rounds once.
void AddInto(void* acc, const void* x, DType dtype, int64_t n);
// acc[i] += x[i]; acc of `dtype`, x fp32.
void AddFp32Into(void* acc, DType dtype, const float* x, int64_t n);
// Sum of squares of n elements of `dtype`, in double.
double SumSquares(const void* x, DType dtype, int64_t n);

}  // namespace zeroshard
