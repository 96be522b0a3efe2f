// The SIMD AdamW range kernels behind AdamWCpu (internal to worker/optim;
// tests call them directly to check each path against the reference). Each
// processes [begin, end) of the shard; its scalar tail uses the reference.
// Call a kernel only when the CPU supports its ISA (CpuHasAvx512 / CpuHasAvx2).
#pragma once

#include <cstdint>

#include "worker/optim/adamw.h"

namespace zeroshard::optim_internal {

// Ranges of at least this many elements write their compute copy with
// non-temporal stores (adamw_simd.cc): 30 bytes an element streamed at
// bf16, past a last-level cache's size.
inline constexpr int64_t kStreamingStoreElements = int64_t{1} << 20;

bool CpuHasAvx512();  // avx512f
bool CpuHasAvx2();    // avx2

void AdamWAvx512Range(const AdamWScalars& s, const AdamWShard& shard, int64_t begin, int64_t end);
void AdamWAvx2Range(const AdamWScalars& s, const AdamWShard& shard, int64_t begin, int64_t end);

double SumSquaresAvx512(const float* x, int64_t n);
double SumSquaresScalar(const float* x, int64_t n);

}  // namespace zeroshard::optim_internal
