// Branch-free float exp and tanh that the compiler can vectorise (glibc's
// expf/tanhf are scalar calls and were ~30% of a small model's step).
//
// FastExp: exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 in
// [-ln2/2, ln2/2], exp(r) by its Taylor series to degree 7 (truncation
// < 2e-9 relative), 2^n built in the exponent bits. Inputs are clamped to
// [-87, 88] so 2^n stays a normal float: relative error ~2 ulp over that
// range; exp(x) for x < -87 returns ~1.6e-38 instead of a denormal/0.
// FastTanh(u) = 1 - 2 / (exp(2u) + 1): absolute error ~1e-7.
#pragma once

#include <cstdint>
#include <cstring>

namespace zeroshard {

inline float FastExp(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float t = x * 1.44269504088896341f;  // x / ln 2
  const int32_t n = static_cast<int32_t>(t + (t >= 0.0f ? 0.5f : -0.5f));
  const float nf = static_cast<float>(n);
  // ln 2 split in two so r keeps its low bits: hi has few mantissa bits.
  const float r = (x - nf * 0.693359375f) - nf * -2.12194440e-4f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (n + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return p * scale;
}

inline float FastTanh(float u) { return 1.0f - 2.0f / (FastExp(2.0f * u) + 1.0f); }

}  // namespace zeroshard
