// Attention kernels of the CPU backend (cpu_attention.cc), called by
// CpuKernels(); shapes and semantics as Kernels::Attention* in kernels.h.
#pragma once

namespace zeroshard {

void CpuAttentionForward(const float* qkv, int B, int T, int C, int NH, float* out,
                         float* att);
void CpuAttentionBackward(const float* dout, const float* qkv, const float* att, int B,
                          int T, int C, int NH, float* dqkv);

}  // namespace zeroshard
