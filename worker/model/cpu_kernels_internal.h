// Attention kernels of the CPU backend (cpu_attention.cc), called by
// CpuKernels(); shapes and semantics as Kernels::Attention* in kernels.h.
#pragma once

#include "worker/model/kernels.h"

namespace zeroshard {

// C = alpha op(A) op(B) + beta C, row-major fp32 with explicit leading
// dimensions (floats between rows): oneDNN's dnnl_sgemm (OpenMP threads), on
// the thread count SetComputeThreads set unless a ScopedSgemmThreads on the
// calling thread says otherwise. A failed GEMM (oneDNN out of memory) prints
// its shape and status and aborts: Kernels' methods return nothing.
void CpuSgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc);

// For its lifetime, CpuSgemm calls on the thread that made it run on
// `threads` threads (1: that thread alone, so several threads may each call
// CpuSgemm without oneDNN splitting those calls again over the same cores).
// Restores the thread's earlier setting at the end. Thread safety: affects
// only the thread that creates it; create and destroy it on that thread.
class ScopedSgemmThreads {
 public:
  explicit ScopedSgemmThreads(int threads);
  ~ScopedSgemmThreads();
  ScopedSgemmThreads(const ScopedSgemmThreads&) = delete;
  ScopedSgemmThreads& operator=(const ScopedSgemmThreads&) = delete;

 private:
  int saved_;
};

// The Llama family's layers (cpu_llama_kernels.cc); as Kernels' methods.
void CpuRmsNormForward(const float* x, const float* w, int N, int C, float eps, float* out,
                       float* rstd);
void CpuRmsNormBackward(const float* dout, const float* x, const float* w, const float* rstd, int N,
                        int C, float* dx, float* dw);
void CpuRope(float* x, int B, int T, int H, int D, const float* cos, const float* sin,
             bool inverse);
void CpuSwigluForward(const float* gu, int N, int I, float* out);
void CpuSwigluBackward(const float* gu, const float* dout, int N, int I, float* dgu);
void CpuPackQkv(const float* q, const float* k, const float* v, int N, int NH, int KV, int D,
                float* qkv);
void CpuUnpackQkvGrad(const float* dqkv, int N, int NH, int KV, int D, float* dq, float* dk,
                      float* dv);

// cpu_decode_attention.cc.
void CpuDecodeAttention(const DecodeAttentionShape& s, const float* q, const float* k_new,
                        const float* v_new, float* k_cache, float* v_cache, float* out);

void CpuAttentionForward(const float* qkv, int B, int T, int C, int NH, float* out, float* att);
void CpuAttentionBackward(const float* dout, const float* qkv, const float* att, int B, int T,
                          int C, int NH, float* dqkv);

}  // namespace zeroshard
