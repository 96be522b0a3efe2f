// Row reductions and the softmax row for the CPU kernels (cpu_kernels.cc,
// cpu_attention.cc). Forced inline, so each ZS_SIMD_CLONES function that
// calls them compiles them for its own instruction set (cpu_simd.h).
//
// How it works: max, sum and dot keep kLanes partial results in one vector
// (GCC vector extensions: one AVX-512 register, two AVX2 or four SSE ones)
// and combine them at the end, so the loop is not one long chain of
// dependent adds. Sums therefore add in another order than a plain loop:
// the last bits differ from it, the same on every call. Inputs are floats,
// n >= 1 for RowMax, n >= 0 otherwise. Thread safety: pure functions.
#pragma once

#include <algorithm>
#include <cstring>

#include "worker/model/cpu_simd.h"
#include "worker/model/fast_math.h"

namespace zeroshard {

constexpr int kRowLanes = 16;
typedef float RowLanes __attribute__((vector_size(kRowLanes * sizeof(float))));

// Lanes are never passed or returned by value: that would change the
// calling convention between the clones (GCC's -Wpsabi).
ZS_ALWAYS_INLINE void LoadLanes(const float* p, RowLanes& v) { std::memcpy(&v, p, sizeof(v)); }

// max of x[0, n), n >= 1 (std::max's order: a NaN after the first element is skipped).
ZS_ALWAYS_INLINE float RowMax(const float* x, int n) {
  float mx = x[0];
  int i = 0;
  if (n >= kRowLanes) {
    RowLanes m, v;
    LoadLanes(x, m);
    for (i = kRowLanes; i + kRowLanes <= n; i += kRowLanes) {
      LoadLanes(x + i, v);
      m = m < v ? v : m;
    }
    for (int l = 0; l < kRowLanes; ++l) mx = std::max(mx, m[l]);
  }
  for (; i < n; ++i) mx = std::max(mx, x[i]);
  return mx;
}

// sum of x[i] * y[i] over [0, n) (y = nullptr: of x[i]).
ZS_ALWAYS_INLINE float RowDot(const float* x, const float* y, int n) {
  RowLanes acc = {}, a, b;
  int i = 0;
  for (; i + kRowLanes <= n; i += kRowLanes) {
    LoadLanes(x + i, a);
    if (y != nullptr) {
      LoadLanes(y + i, b);
      a *= b;
    }
    acc += a;
  }
  float sum = 0.0f;
  for (int l = 0; l < kRowLanes; ++l) sum += acc[l];
  for (; i < n; ++i) sum += y == nullptr ? x[i] : x[i] * y[i];
  return sum;
}

// out = exp(in - max(in)) / sum over [0, n), n >= 1 (out may alias in).
// Returns the max; *sum_out gets the sum of the exponentials.
ZS_ALWAYS_INLINE float SoftmaxRow(const float* in, int n, float* out, float* sum_out) {
  const float mx = RowMax(in, n);
  for (int i = 0; i < n; ++i) out[i] = FastExp(in[i] - mx);
  const float sum = RowDot(out, nullptr, n);
  const float inv = 1.0f / sum;
  for (int i = 0; i < n; ++i) out[i] *= inv;
  *sum_out = sum;
  return mx;
}

}  // namespace zeroshard
