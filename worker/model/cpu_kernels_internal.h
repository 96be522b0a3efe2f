// Attention kernels of the CPU backend (cpu_attention.cc), called by
// CpuKernels(); shapes and semantics as Kernels::Attention* in kernels.h.
#pragma once

namespace zeroshard {

// C = alpha op(A) op(B) + beta C, row-major fp32 with explicit leading
// dimensions (floats between rows): OpenBLAS's cblas_sgemm, on the thread
// count SetComputeThreads set unless a ScopedSgemmThreads says otherwise.
void CpuSgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
              int lda, const float* B, int ldb, float beta, float* C, int ldc);

// For its lifetime, each CpuSgemm call runs on `threads` threads (1: the
// caller's, so several threads may each call CpuSgemm without OpenBLAS
// splitting those calls again over the same cores). Restores the compute
// thread count at the end. Thread safety: create on the thread that runs
// the model, while no CpuSgemm is in flight.
class ScopedSgemmThreads {
 public:
  explicit ScopedSgemmThreads(int threads);
  ~ScopedSgemmThreads();
  ScopedSgemmThreads(const ScopedSgemmThreads&) = delete;
  ScopedSgemmThreads& operator=(const ScopedSgemmThreads&) = delete;

 private:
  bool changed_;
};

void CpuAttentionForward(const float* qkv, int B, int T, int C, int NH, float* out,
                         float* att);
void CpuAttentionBackward(const float* dout, const float* qkv, const float* att, int B,
                          int T, int C, int NH, float* dqkv);

}  // namespace zeroshard
