// AVX2 and AVX-512 AdamW kernels. Built without -march: each function carries
// its own target attribute and is called only after __builtin_cpu_supports.
// The vector code performs the same single-precision operations in the same
// order as adamw_element.h, with no fused multiply-add (this file is compiled
// with -ffp-contract=off; GCC's intrinsics are plain vector arithmetic and
// would otherwise be contracted), so results are bit-identical to the
// reference. bf16 rounding uses the integer round-to-nearest-even of
// common/dtype.h (not vcvtneps2bf16, which flushes denormals).
//
// A range of at least kStreamingStoreElements writes its compute copy with
// non-temporal stores: the copy is only written here, so a plain store
// first reads each line it fills (write-allocate), and a range that large
// streams more than a last-level cache holds, so the copy would not be in
// cache when it is next read anyway. The elements before the copy's first
// aligned address go through the reference. Measured: bf16 copy, 64 Mi
// parameters, AVX2 on AMD EPYC, 1 thread 1,781 -> 1,956-1,985 M params/s.
#include <immintrin.h>

#include <cstdint>

// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized on their own
// _mm512_undefined_* placeholders once inlined; the warning is about the
// header, not this code.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "worker/optim/adamw_element.h"
#include "worker/optim/adamw_simd.h"

namespace zeroshard::optim_internal {

bool CpuHasAvx512() { return __builtin_cpu_supports("avx512f"); }
bool CpuHasAvx2() { return __builtin_cpu_supports("avx2"); }

namespace {

// How far ahead of the element being updated the loops ask for the lines
// of the four streams they read (gradient, m, v, master): 16 KiB of each.
// The hardware prefetchers alone leave the loop at 0.90-0.97 of
// adamw_bench's streaming limit. Measured on AMD EPYC (Zen 5), AVX2, 64 Mi
// parameters, alternating with and without: no compute copy 2,125-2,162 ->
// 2,320-2,440 M params/s at 1 thread, 4,071-4,227 -> 4,491-4,636 at 2;
// bf16 copy 1,878-1,946 -> 1,975-2,121 and 3,534-3,663 -> 3,866-4,014
// (1 KiB ahead was slower, 4 KiB gained little, 64 KiB less than 16).
constexpr int64_t kPrefetchElements = 4096;

// Asks for the line holding element `at` of each stream the loops read
// (read, keep in all levels). Always inlined: without it GCC 12 did not
// inline it into the target("avx2"/"avx512f") loops, judged the call free
// of side effects and deleted it, so no prefetch was left at all.
__attribute__((always_inline)) inline void PrefetchAt(const AdamWShard& sh, int64_t at) {
  __builtin_prefetch(sh.grad + at, 0, 3);
  __builtin_prefetch(sh.m + at, 0, 3);
  __builtin_prefetch(sh.v + at, 0, 3);
  __builtin_prefetch(sh.master + at, 0, 3);
}

// Where [begin, end) starts its vector loop with `align`-byte stores into
// the compute copy: `begin` for plain stores; for non-temporal ones the
// first element whose compute-copy address is aligned (the elements before
// it run through the reference here). `stream` says which.
int64_t VectorStart(const AdamWScalars& s, const AdamWShard& sh, int64_t begin, int64_t end,
                    size_t align, bool* stream) {
  *stream = false;
  if (sh.compute_out == nullptr || end - begin < kStreamingStoreElements) return begin;
  const size_t elem = sh.compute_dtype == DType::kBf16 ? 2 : 4;
  const auto at = reinterpret_cast<uintptr_t>(sh.compute_out) + begin * elem;
  const size_t gap = (align - at % align) % align;
  if (gap % elem != 0) return begin;  // The copy is not aligned to its element size.
  const int64_t start = begin + static_cast<int64_t>(gap / elem);
  AdamWReferenceRange(s, sh, begin, start);
  *stream = true;
  return start;
}

}  // namespace

__attribute__((target("avx512f"))) void AdamWAvx512Range(const AdamWScalars& s,
                                                         const AdamWShard& sh, int64_t begin,
                                                         int64_t end) {
  const __m512 gs = _mm512_set1_ps(s.grad_scale), b1 = _mm512_set1_ps(s.beta1),
               omb1 = _mm512_set1_ps(s.one_minus_beta1), b2 = _mm512_set1_ps(s.beta2),
               omb2 = _mm512_set1_ps(s.one_minus_beta2), ibc2 = _mm512_set1_ps(s.inv_sqrt_bc2),
               eps = _mm512_set1_ps(s.eps), decay = _mm512_set1_ps(s.decay),
               step = _mm512_set1_ps(s.step_size);
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000),
                round = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1),
                quiet = _mm512_set1_epi32(0x40);
  float* out32 = sh.compute_dtype == DType::kFp32 ? static_cast<float*>(sh.compute_out) : nullptr;
  bf16* out16 = sh.compute_dtype == DType::kBf16 ? static_cast<bf16*>(sh.compute_out) : nullptr;
  bool stream = false;  // out32: 64-byte stores; out16: 32-byte ones.
  int64_t i = VectorStart(s, sh, begin, end, out16 != nullptr ? 32 : 64, &stream);
  for (; i + 16 <= end; i += 16) {
    // One 64-byte line of each stream per 16 elements.
    if (i + kPrefetchElements < end) PrefetchAt(sh, i + kPrefetchElements);
    const __m512 g = _mm512_mul_ps(_mm512_loadu_ps(sh.grad + i), gs);
    const __m512 m =
        _mm512_add_ps(_mm512_mul_ps(b1, _mm512_loadu_ps(sh.m + i)), _mm512_mul_ps(omb1, g));
    const __m512 v = _mm512_add_ps(_mm512_mul_ps(b2, _mm512_loadu_ps(sh.v + i)),
                                   _mm512_mul_ps(omb2, _mm512_mul_ps(g, g)));
    const __m512 denom = _mm512_add_ps(_mm512_mul_ps(_mm512_sqrt_ps(v), ibc2), eps);
    __m512 p = _mm512_loadu_ps(sh.master + i);
    p = _mm512_sub_ps(_mm512_mul_ps(p, decay), _mm512_mul_ps(step, _mm512_div_ps(m, denom)));
    _mm512_storeu_ps(sh.m + i, m);
    _mm512_storeu_ps(sh.v + i, v);
    _mm512_storeu_ps(sh.master + i, p);
    if (out32 != nullptr) {
      if (stream)
        _mm512_stream_ps(out32 + i, p);
      else
        _mm512_storeu_ps(out32 + i, p);
    }
    if (out16 != nullptr) {
      const __m512i u = _mm512_castps_si512(p);
      const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), one);
      const __m512i rounded =
          _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, round), lsb), 16);
      const __m512i nan = _mm512_or_si512(_mm512_srli_epi32(u, 16), quiet);
      const __mmask16 is_nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, abs_mask), inf);
      const __m512i h = _mm512_mask_blend_epi32(is_nan, rounded, nan);
      auto* to = reinterpret_cast<__m256i*>(out16 + i);
      if (stream)
        _mm256_stream_si256(to, _mm512_cvtepi32_epi16(h));
      else
        _mm256_storeu_si256(to, _mm512_cvtepi32_epi16(h));
    }
  }
  if (stream) _mm_sfence();  // Ordered before whatever reads the copy next.
  AdamWReferenceRange(s, sh, i, end);
}

__attribute__((target("avx2"))) void AdamWAvx2Range(const AdamWScalars& s, const AdamWShard& sh,
                                                    int64_t begin, int64_t end) {
  const __m256 gs = _mm256_set1_ps(s.grad_scale), b1 = _mm256_set1_ps(s.beta1),
               omb1 = _mm256_set1_ps(s.one_minus_beta1), b2 = _mm256_set1_ps(s.beta2),
               omb2 = _mm256_set1_ps(s.one_minus_beta2), ibc2 = _mm256_set1_ps(s.inv_sqrt_bc2),
               eps = _mm256_set1_ps(s.eps), decay = _mm256_set1_ps(s.decay),
               step = _mm256_set1_ps(s.step_size);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000),
                round = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1),
                quiet = _mm256_set1_epi32(0x40);
  float* out32 = sh.compute_dtype == DType::kFp32 ? static_cast<float*>(sh.compute_out) : nullptr;
  bf16* out16 = sh.compute_dtype == DType::kBf16 ? static_cast<bf16*>(sh.compute_out) : nullptr;
  bool stream = false;  // out32: 32-byte stores; out16: 16-byte ones.
  int64_t i = VectorStart(s, sh, begin, end, out16 != nullptr ? 16 : 32, &stream);
  for (; i + 8 <= end; i += 8) {
    if (((i - begin) & 15) == 0 && i + kPrefetchElements < end) {
      PrefetchAt(sh, i + kPrefetchElements);  // A line of each stream per 16 elements.
    }
    const __m256 g = _mm256_mul_ps(_mm256_loadu_ps(sh.grad + i), gs);
    const __m256 m =
        _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(sh.m + i)), _mm256_mul_ps(omb1, g));
    const __m256 v = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(sh.v + i)),
                                   _mm256_mul_ps(omb2, _mm256_mul_ps(g, g)));
    const __m256 denom = _mm256_add_ps(_mm256_mul_ps(_mm256_sqrt_ps(v), ibc2), eps);
    __m256 p = _mm256_loadu_ps(sh.master + i);
    p = _mm256_sub_ps(_mm256_mul_ps(p, decay), _mm256_mul_ps(step, _mm256_div_ps(m, denom)));
    _mm256_storeu_ps(sh.m + i, m);
    _mm256_storeu_ps(sh.v + i, v);
    _mm256_storeu_ps(sh.master + i, p);
    if (out32 != nullptr) {
      if (stream)
        _mm256_stream_ps(out32 + i, p);
      else
        _mm256_storeu_ps(out32 + i, p);
    }
    if (out16 != nullptr) {
      const __m256i u = _mm256_castps_si256(p);
      const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
      const __m256i rounded =
          _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, round), lsb), 16);
      const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), quiet);
      const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
      const __m256i h = _mm256_blendv_epi8(rounded, nan, is_nan);
      // Values fit in 16 bits, so unsigned-saturating packs are exact.
      const __m128i packed =
          _mm_packus_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
      auto* to = reinterpret_cast<__m128i*>(out16 + i);
      if (stream)
        _mm_stream_si128(to, packed);
      else
        _mm_storeu_si128(to, packed);
    }
  }
  if (stream) _mm_sfence();  // Ordered before whatever reads the copy next.
  AdamWReferenceRange(s, sh, i, end);
}

__attribute__((target("avx512f"))) double SumSquaresAvx512(const float* x, int64_t n) {
  __m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512d a = _mm512_cvtps_pd(_mm256_loadu_ps(x + i));
    const __m512d b = _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8));
    acc0 = _mm512_add_pd(acc0, _mm512_mul_pd(a, a));
    acc1 = _mm512_add_pd(acc1, _mm512_mul_pd(b, b));
  }
  double sum = _mm512_reduce_add_pd(_mm512_add_pd(acc0, acc1));
  return sum + SumSquaresScalar(x + i, n - i);
}

double SumSquaresScalar(const float* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

}  // namespace zeroshard::optim_internal

#pragma GCC diagnostic pop
