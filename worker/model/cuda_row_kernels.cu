// Row and element-wise kernels of the CUDA model backend (formulas in
// worker/model/kernels.h, written as cpu_kernels.cc writes them so the two
// differ only by rounding: expf/tanhf here, the fast polynomials there).
//
// Row kernels give each row one warp: lane l takes columns l, l + 32, ...
// and the row's sums are warp reductions (cuda_kernel_util.cuh), so every
// run sums in the same order.
#include <cuda_runtime.h>

#include <cmath>

#include "worker/device/cuda_launch.cuh"
#include "worker/model/cuda_kernel_util.cuh"
#include "worker/model/cuda_model_kernels.h"
#include "worker/model/kernel_constants.h"

namespace zeroshard::model_cuda {
namespace {

__global__ void LayerNormForwardKernel(const float* x, const float* gamma, const float* beta, int N,
                                       int C, float* out, float* mean, float* rstd) {
  const int64_t row = WarpRow();
  if (row >= N) return;  // Whole warps leave together: the row is warp-uniform.
  const float* xr = x + row * C;
  float* yr = out + row * C;
  float sum = 0.0f;
  for (int c = Lane(); c < C; c += kWarp) sum += xr[c];
  const float m = WarpSum(sum) / static_cast<float>(C);
  float sq = 0.0f;
  for (int c = Lane(); c < C; c += kWarp) sq += (xr[c] - m) * (xr[c] - m);
  const float s = 1.0f / sqrtf(WarpSum(sq) / static_cast<float>(C) + kLayerNormEps);
  for (int c = Lane(); c < C; c += kWarp) yr[c] = (xr[c] - m) * s * gamma[c] + beta[c];
  if (Lane() == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// dx = rstd * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)),
// dnorm = dy * gamma, xhat = (x - mean) * rstd.
__global__ void LayerNormBackwardInputKernel(const float* dout, const float* x, const float* gamma,
                                             const float* mean, const float* rstd, int N, int C,
                                             float* dx) {
  const int64_t row = WarpRow();
  if (row >= N) return;
  const float* dy = dout + row * C;
  const float* xr = x + row * C;
  float* dxr = dx + row * C;
  const float m = mean[row], s = rstd[row];
  float sum_dnorm = 0.0f, sum_dnorm_xhat = 0.0f;
  for (int c = Lane(); c < C; c += kWarp) {
    const float dnorm = dy[c] * gamma[c];
    sum_dnorm += dnorm;
    sum_dnorm_xhat += dnorm * ((xr[c] - m) * s);
  }
  const float mean_dnorm = WarpSum(sum_dnorm) / static_cast<float>(C);
  const float mean_dnorm_xhat = WarpSum(sum_dnorm_xhat) / static_cast<float>(C);
  for (int c = Lane(); c < C; c += kWarp) {
    const float xhat = (xr[c] - m) * s;
    dxr[c] += s * (dy[c] * gamma[c] - mean_dnorm - xhat * mean_dnorm_xhat);
  }
}

// probs may alias logits: every lane reads the target logit, then the warp
// synchronises before any lane overwrites its columns.
__global__ void SoftmaxCrossEntropyForwardKernel(const float* logits, const int32_t* targets, int N,
                                                 int V, float* probs, float* losses) {
  const int64_t row = WarpRow();
  if (row >= N) return;
  const float* l = logits + row * V;
  float* p = probs + row * V;
  const int32_t target = targets[row];
  if (target == kIgnoreTarget) {  // Not counted: no loss, no gradient.
    for (int v = Lane(); v < V; v += kWarp) p[v] = 0.0f;
    if (Lane() == 0) losses[row] = 0.0f;
    return;
  }
  if (target < 0 || target >= V) {
    for (int v = Lane(); v < V; v += kWarp) p[v] = NAN;
    if (Lane() == 0) losses[row] = NAN;
    return;
  }
  const float target_logit = l[target];
  float mx = -INFINITY;
  for (int v = Lane(); v < V; v += kWarp) mx = fmaxf(mx, l[v]);
  mx = WarpMax(mx);
  float sum = 0.0f;
  for (int v = Lane(); v < V; v += kWarp) sum += expf(l[v] - mx);
  sum = WarpSum(sum);
  __syncwarp();
  const float inv = 1.0f / sum;
  for (int v = Lane(); v < V; v += kWarp) p[v] = expf(l[v] - mx) * inv;
  // log-sum-exp form: exact even when probs[target] underflows.
  if (Lane() == 0) losses[row] = logf(sum) + mx - target_logit;
}

__global__ void SoftmaxCrossEntropyBackwardKernel(const float* probs, const int32_t* targets,
                                                  int64_t n, int V, float scale, float* dlogits) {
  for (int64_t i = First(); i < n; i += Stride()) {
    const int64_t row = i / V;
    float d = scale * probs[i];
    if (i - row * V == targets[row]) d -= scale;
    dlogits[i] = d;
  }
}

__global__ void GeluForwardKernel(const float* x, int64_t n, float* out) {
  for (int64_t i = First(); i < n; i += Stride()) {
    const float v = x[i];
    out[i] = 0.5f * v * (1.0f + tanhf(kGeluScale * (v + kGeluCubic * v * v * v)));
  }
}

__global__ void GeluBackwardKernel(const float* x, const float* dout, int64_t n, float* dx) {
  for (int64_t i = First(); i < n; i += Stride()) {
    const float v = x[i];
    const float th = tanhf(kGeluScale * (v + kGeluCubic * v * v * v));
    const float dinner = kGeluScale * (1.0f + 3.0f * kGeluCubic * v * v);
    dx[i] += (0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * dinner) * dout[i];
  }
}

__global__ void BiasAddKernel(float* out, const float* bias, int64_t n, int C) {
  for (int64_t i = First(); i < n; i += Stride()) out[i] += bias[i % C];
}

__global__ void AddKernel(const float* a, const float* b, int64_t n, float* y) {
  for (int64_t i = First(); i < n; i += Stride()) y[i] = a[i] + b[i];
}

__global__ void AccumulateKernel(const float* x, int64_t n, float* y) {
  for (int64_t i = First(); i < n; i += Stride()) y[i] += x[i];
}

}  // namespace

cudaError_t LayerNormForward(const float* x, const float* gamma, const float* beta, int N, int C,
                             float* out, float* mean, float* rstd, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return cudaSuccess;
  return CheckedLaunch([&] {
    LayerNormForwardKernel<<<RowBlocks(N), kThreads, 0, stream>>>(x, gamma, beta, N, C, out, mean,
                                                                  rstd);
  });
}

cudaError_t LayerNormBackwardInput(const float* dout, const float* x, const float* gamma,
                                   const float* mean, const float* rstd, int N, int C, float* dx,
                                   cudaStream_t stream) {
  if (N <= 0 || C <= 0) return cudaSuccess;
  return CheckedLaunch([&] {
    LayerNormBackwardInputKernel<<<RowBlocks(N), kThreads, 0, stream>>>(dout, x, gamma, mean, rstd,
                                                                        N, C, dx);
  });
}

cudaError_t SoftmaxCrossEntropyForward(const float* logits, const int32_t* targets, int N, int V,
                                       float* probs, float* losses, cudaStream_t stream) {
  if (N <= 0 || V <= 0) return cudaSuccess;
  return CheckedLaunch([&] {
    SoftmaxCrossEntropyForwardKernel<<<RowBlocks(N), kThreads, 0, stream>>>(logits, targets, N, V,
                                                                            probs, losses);
  });
}

cudaError_t SoftmaxCrossEntropyBackward(const float* probs, const int32_t* targets, int N, int V,
                                        float scale, float* dlogits, cudaStream_t stream) {
  const int64_t n = int64_t{N} * V;
  if (n <= 0) return cudaSuccess;
  return CheckedLaunch([&] {
    SoftmaxCrossEntropyBackwardKernel<<<ElementBlocks(n), kThreads, 0, stream>>>(probs, targets, n,
                                                                                 V, scale, dlogits);
  });
}

cudaError_t GeluForward(const float* x, int64_t n, float* out, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return CheckedLaunch(
      [&] { GeluForwardKernel<<<ElementBlocks(n), kThreads, 0, stream>>>(x, n, out); });
}

cudaError_t GeluBackward(const float* x, const float* dout, int64_t n, float* dx,
                         cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return CheckedLaunch(
      [&] { GeluBackwardKernel<<<ElementBlocks(n), kThreads, 0, stream>>>(x, dout, n, dx); });
}

cudaError_t BiasAdd(float* out, const float* bias, int N, int C, cudaStream_t stream) {
  const int64_t n = int64_t{N} * C;
  if (n <= 0) return cudaSuccess;
  return CheckedLaunch(
      [&] { BiasAddKernel<<<ElementBlocks(n), kThreads, 0, stream>>>(out, bias, n, C); });
}

cudaError_t Add(const float* a, const float* b, int64_t n, float* y, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return CheckedLaunch([&] { AddKernel<<<ElementBlocks(n), kThreads, 0, stream>>>(a, b, n, y); });
}

cudaError_t Accumulate(const float* x, int64_t n, float* y, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  return CheckedLaunch(
      [&] { AccumulateKernel<<<ElementBlocks(n), kThreads, 0, stream>>>(x, n, y); });
}

}  // namespace zeroshard::model_cuda
