// Launchers of the CUDA model kernels (cuda_row_kernels.cu,
// cuda_reduce_kernels.cu, cuda_attention_kernels.cu, cuda_llama_kernels.cu). Plain C++ over the
// CUDA runtime types, no abseil or project host headers, so nvcc compiles
// the kernels alone (as worker/device/cuda_kernels.h does). Use CudaKernels
// (cuda_kernels.h) instead: it owns the scratch these need and the cuBLAS
// half of each operation.
//
// Shapes, formulas and the "adds" / "writes" rule are Kernels' (kernels.h);
// every pointer is device memory, fp32 row-major unless an int32 index.
// Every launcher enqueues on `stream` and returns the launch's error
// (cudaSuccess and nothing launched when a size is 0). Sizes are ints as in
// Kernels; products of two sizes are formed in int64.
//
// Determinism: no launcher uses atomics; every sum is taken in an order
// fixed by the shape alone, so the same inputs give the same bits every run.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace zeroshard::model_cuda {

// --- Row kernels (cuda_row_kernels.cu): one warp per row. ---------------
cudaError_t LayerNormForward(const float* x, const float* gamma, const float* beta, int N, int C,
                             float* out, float* mean, float* rstd, cudaStream_t stream);
// dx += ... only (the parameter gradients come from ColumnSums below).
cudaError_t LayerNormBackwardInput(const float* dout, const float* x, const float* gamma,
                                   const float* mean, const float* rstd, int N, int C, float* dx,
                                   cudaStream_t stream);
// Tokens outside [0, V) give a NaN loss and probs row (the kernel cannot
// stop the process; the caller sees the NaN loss), and no write outside.
cudaError_t SoftmaxCrossEntropyForward(const float* logits, const int32_t* targets, int N, int V,
                                       float* probs, float* losses, cudaStream_t stream);
cudaError_t SoftmaxCrossEntropyBackward(const float* probs, const int32_t* targets, int N, int V,
                                        float scale, float* dlogits, cudaStream_t stream);

// --- Element-wise (cuda_row_kernels.cu). ----------------------------------
cudaError_t GeluForward(const float* x, int64_t n, float* out, cudaStream_t stream);
cudaError_t GeluBackward(const float* x, const float* dout, int64_t n, float* dx,
                         cudaStream_t stream);
cudaError_t BiasAdd(float* out, const float* bias, int N, int C, cudaStream_t stream);
cudaError_t Add(const float* a, const float* b, int64_t n, float* y, cudaStream_t stream);
cudaError_t Accumulate(const float* x, int64_t n, float* y, cudaStream_t stream);

// --- Column reductions and embeddings (cuda_reduce_kernels.cu). ---------
// What ColumnSums sums down each column c of [N, C]:
enum class ColumnTerm {
  kValue,     // a[n,c]                                  (bias, LayerNorm beta)
  kNormGrad,  // a[n,c] * (x[n,c] - mean[n]) * rstd[n]   (LayerNorm gamma)
  kRmsGrad,   // a[n,c] * (x[n,c] * rstd[n])             (RMSNorm weight)
};
// Rows of one partial sum: ColumnSums needs ColumnPartials(N) * C floats of
// scratch.
constexpr int kColumnChunkRows = 128;
inline int64_t ColumnPartials(int N) {
  return (int64_t{N} + kColumnChunkRows - 1) / kColumnChunkRows;
}
// out[c] += sum_n term(n, c): chunk partials of kColumnChunkRows rows (each
// summed in row order), then the partials in chunk order. x and rstd are
// read only for kNormGrad and kRmsGrad, mean only for kNormGrad (each may be
// null otherwise).
cudaError_t ColumnSums(ColumnTerm term, const float* a, const float* x, const float* mean,
                       const float* rstd, int N, int C, float* partials, float* out,
                       cudaStream_t stream);
// *sum = sum of x[0..n) in fp64 (writes, also for n = 0): one block, each
// thread sums a strided slice in index order, then a fixed tree.
cudaError_t Sum(const float* x, int64_t n, double* sum, cudaStream_t stream);
// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:], or the wte row alone when wpe
// is null; a token outside [0, V) gives a NaN row (no read outside wte).
cudaError_t EmbeddingForward(const int32_t* tokens, const float* wte, const float* wpe, int B,
                             int T, int C, int V, float* out, cudaStream_t stream);
// dwte[v,c] += sum over positions n with tokens[n] == v, in position order;
// dwpe[t,c] += sum over b in order (skipped when dwpe is null). Tokens outside
// [0, V) add nothing. O(B*T * C) work after a radix sort of the B*T tokens
// (cuda_reduce_kernels.cu); B*T at most INT32_MAX (cudaErrorInvalidValue).
// cudaErrorMemoryAllocation when the 12-byte-a-token scratch does not fit.
cudaError_t EmbeddingBackward(const float* dout, const int32_t* tokens, int B, int T, int C, int V,
                              float* dwte, float* dwpe, cudaStream_t stream);

// --- The Llama family's layers (cuda_llama_kernels.cu). ------------------
// One warp per row, as LayerNorm.
cudaError_t RmsNormForward(const float* x, const float* w, int N, int C, float eps, float* out,
                           float* rstd, cudaStream_t stream);
// dx += ... only (dw comes from ColumnSums' kRmsGrad).
cudaError_t RmsNormBackwardInput(const float* dout, const float* x, const float* w,
                                 const float* rstd, int N, int C, float* dx, cudaStream_t stream);
// Element-wise: one thread per rotated pair. cudaErrorInvalidValue, and
// nothing launched, for an odd D.
cudaError_t Rope(float* x, int B, int T, int H, int D, const float* cos, const float* sin,
                 bool inverse, cudaStream_t stream);
cudaError_t SwigluForward(const float* gu, int N, int I, float* out, cudaStream_t stream);
cudaError_t SwigluBackward(const float* gu, const float* dout, int N, int I, float* dgu,
                           cudaStream_t stream);
// One thread per qkv element. Unless KV >= 1 divides NH: cudaErrorInvalidValue
// and nothing launched (as for UnpackQkvGrad).
cudaError_t PackQkv(const float* q, const float* k, const float* v, int N, int NH, int KV, int D,
                    float* qkv, cudaStream_t stream);
// One thread per element of dq, dk and dv; dk and dv's threads sum their
// group's heads in head order, so the bits match the CPU's loop.
cudaError_t UnpackQkvGrad(const float* dqkv, int N, int NH, int KV, int D, float* dq, float* dk,
                          float* dv, cudaStream_t stream);

// --- Attention layout (cuda_attention_kernels.cu). ------------------------
// x [B,T,*] with rows of `row_stride` floats, head h at channels
// [h*hs, (h+1)*hs) (hs = C / NH) -> y [B,NH,T,hs] contiguous (writes).
cudaError_t SplitHeads(const float* x, int64_t row_stride, int B, int T, int C, int NH, float* y,
                       cudaStream_t stream);
// The adjoint: out[b,t,h*hs+i] (rows of `row_stride` floats) = y[b,h,t,i],
// or += with `accumulate`.
cudaError_t MergeHeads(const float* y, int B, int T, int C, int NH, int64_t row_stride,
                       bool accumulate, float* out, cudaStream_t stream);
// In place over att [rows = B*NH*T, T] holding the scaled scores
// s = q.k / sqrt(hs) (the GEMM applies the scale): row r, query t = r mod T,
// becomes softmax(s[0..t]) with zeros above the diagonal.
cudaError_t CausalSoftmaxForward(float* att, int64_t rows, int T, cudaStream_t stream);
// In place over datt: ds[t,u] = att[t,u] (datt[t,u] - sum_j att[t,j]
// datt[t,j]) * scale for u <= t, 0 above (the gradient of the unscaled q.k).
cudaError_t CausalSoftmaxBackward(const float* att, float* datt, int64_t rows, int T, float scale,
                                  cudaStream_t stream);

// --- Incremental decoding (cuda_decode_attention_kernels.cu). ------------
// Kernels::DecodeAttention's two steps: a copy kernel stores the keys and
// values, then one warp per (new token, head) with an online softmax (fp32).
// Head sizes up to kMaxDecodeHeadDim (each lane keeps D / 32 accumulators);
// cudaErrorInvalidValue, and nothing launched, for a larger D, a KV that
// does not divide NH, or positions past P.
constexpr int kMaxDecodeHeadDim = 256;
cudaError_t DecodeAttention(const float* q, int64_t q_stride, const float* k_new,
                            const float* v_new, int64_t kv_stride, int pos, int n, int NH, int KV,
                            int D, int P, float* k_cache, float* v_cache, float* out,
                            cudaStream_t stream);

}  // namespace zeroshard::model_cuda
