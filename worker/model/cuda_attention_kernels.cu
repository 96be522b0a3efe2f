// The non-GEMM half of causal attention on the GPU (Vaswani et al., 2017,
// with GPT-2's causal mask; the GEMMs are cuBLAS calls in
// cuda_attention.cc): moving heads between the token-major [B,T,C] layout
// and the head-major [B,NH,T,hs] one that strided-batched GEMMs need, and
// the causal softmax with its backward, one warp per row of att.
#include <cuda_runtime.h>

#include <cmath>

#include "worker/device/cuda_launch.cuh"
#include "worker/model/cuda_kernel_util.cuh"
#include "worker/model/cuda_model_kernels.h"

namespace zeroshard::model_cuda {
namespace {

// Element i of the head-major [B,NH,T,hs] tensor, as its offset in a
// token-major tensor with rows of row_stride floats.
__device__ __forceinline__ int64_t TokenMajorOffset(int64_t i, int T, int NH, int hs,
                                                    int64_t row_stride) {
  const int64_t d = i % hs;
  const int64_t t = (i / hs) % T;
  const int64_t h = (i / (int64_t{hs} * T)) % NH;
  const int64_t b = i / (int64_t{hs} * T * NH);
  return (b * T + t) * row_stride + h * hs + d;
}

__global__ void SplitHeadsKernel(const float* x, int64_t row_stride, int T, int NH, int hs,
                                 int64_t n, float* y) {
  for (int64_t i = First(); i < n; i += Stride()) {
    y[i] = x[TokenMajorOffset(i, T, NH, hs, row_stride)];
  }
}

__global__ void MergeHeadsKernel(const float* y, int T, int NH, int hs, int64_t row_stride,
                                 bool accumulate, int64_t n, float* out) {
  for (int64_t i = First(); i < n; i += Stride()) {
    float& o = out[TokenMajorOffset(i, T, NH, hs, row_stride)];
    o = accumulate ? o + y[i] : y[i];
  }
}

__global__ void CausalSoftmaxForwardKernel(float* att, int64_t rows, int T) {
  const int64_t row = WarpRow();
  if (row >= rows) return;
  const int t = static_cast<int>(row % T);
  float* a = att + row * T;
  float mx = -INFINITY;
  for (int u = Lane(); u <= t; u += kWarp) mx = fmaxf(mx, a[u]);
  mx = WarpMax(mx);
  float sum = 0.0f;
  for (int u = Lane(); u <= t; u += kWarp) sum += expf(a[u] - mx);
  const float inv = 1.0f / WarpSum(sum);
  for (int u = Lane(); u < T; u += kWarp) a[u] = u <= t ? expf(a[u] - mx) * inv : 0.0f;
}

__global__ void CausalSoftmaxBackwardKernel(const float* att, float* datt, int64_t rows, int T,
                                            float scale) {
  const int64_t row = WarpRow();
  if (row >= rows) return;
  const int t = static_cast<int>(row % T);
  const float* a = att + row * T;
  float* d = datt + row * T;
  float dot = 0.0f;
  for (int u = Lane(); u <= t; u += kWarp) dot += a[u] * d[u];
  dot = WarpSum(dot);
  for (int u = Lane(); u < T; u += kWarp) d[u] = u <= t ? a[u] * (d[u] - dot) * scale : 0.0f;
}

}  // namespace

cudaError_t SplitHeads(const float* x, int64_t row_stride, int B, int T, int C, int NH, float* y,
                       cudaStream_t stream) {
  const int64_t n = int64_t{B} * T * C;
  if (n <= 0 || NH <= 0) return cudaSuccess;
  return CheckedLaunch([&] {
    SplitHeadsKernel<<<ElementBlocks(n), kThreads, 0, stream>>>(x, row_stride, T, NH, C / NH, n, y);
  });
}

cudaError_t MergeHeads(const float* y, int B, int T, int C, int NH, int64_t row_stride,
                       bool accumulate, float* out, cudaStream_t stream) {
  const int64_t n = int64_t{B} * T * C;
  if (n <= 0 || NH <= 0) return cudaSuccess;
  return CheckedLaunch([&] {
    MergeHeadsKernel<<<ElementBlocks(n), kThreads, 0, stream>>>(y, T, NH, C / NH, row_stride,
                                                                accumulate, n, out);
  });
}

cudaError_t CausalSoftmaxForward(float* att, int64_t rows, int T, cudaStream_t stream) {
  if (rows <= 0 || T <= 0) return cudaSuccess;
  return CheckedLaunch(
      [&] { CausalSoftmaxForwardKernel<<<RowBlocks(rows), kThreads, 0, stream>>>(att, rows, T); });
}

cudaError_t CausalSoftmaxBackward(const float* att, float* datt, int64_t rows, int T, float scale,
                                  cudaStream_t stream) {
  if (rows <= 0 || T <= 0) return cudaSuccess;
  return CheckedLaunch([&] {
    CausalSoftmaxBackwardKernel<<<RowBlocks(rows), kThreads, 0, stream>>>(att, datt, rows, T,
                                                                          scale);
  });
}

}  // namespace zeroshard::model_cuda
