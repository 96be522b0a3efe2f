// ZS_SIMD_CLONES: function multi-versioning for the CPU kernels' loops. GCC
// and Clang compile a marked function once for AVX-512, once for AVX2 and
// once for the x86-64 baseline (SSE2), and the loader picks the widest the
// CPU has (an ifunc), so one binary runs anywhere and still uses the wide
// vectors. The loops are float maps and reductions: the baseline's 4 lanes
// become 8 or 16. What changes with the instruction set: reductions sum in
// another order and products may fuse into FMAs, so the last bits differ
// between machines; on one machine a kernel gives the same bits every call.
// A lambda inside a marked function is NOT cloned: put the loop in a marked
// function and call it from the lambda. Helpers a marked function calls are
// compiled for the baseline unless inlined: mark them ZS_ALWAYS_INLINE.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ZS_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ZS_SIMD_CLONES
#endif
#define ZS_ALWAYS_INLINE inline __attribute__((always_inline))
