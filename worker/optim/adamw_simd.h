// The SIMD AdamW range kernels behind AdamWCpu (internal to worker/optim;
// tests call them directly to check each path against the reference). Each
// processes [begin, end) of the shard; its scalar tail uses the reference.
// Call a kernel only when the CPU supports its ISA (CpuHasAvx512 / CpuHasAvx2).
#pragma once

#include <cstdint>

#include "worker/optim/adamw.h"

namespace zeroshard::optim_internal {

bool CpuHasAvx512();  // avx512f
bool CpuHasAvx2();    // avx2

void AdamWAvx512Range(const AdamWScalars& s, const AdamWShard& shard, int64_t begin, int64_t end);
void AdamWAvx2Range(const AdamWScalars& s, const AdamWShard& shard, int64_t begin, int64_t end);

double SumSquaresAvx512(const float* x, int64_t n);
double SumSquaresScalar(const float* x, int64_t n);

}  // namespace zeroshard::optim_internal
