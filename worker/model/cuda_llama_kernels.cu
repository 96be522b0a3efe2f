// The Llama family's layers in the CUDA model backend (formulas in
// worker/model/kernels.h, written as cpu_llama_kernels.cc writes them so the
// two differ only by rounding: expf and fused multiply-adds here).
//
// RMSNorm gives each row one warp, as LayerNorm does (cuda_row_kernels.cu):
// the row's sums are warp reductions, the same order every run. Its weight
// gradient is a column sum (ColumnSums' kRmsGrad, cuda_reduce_kernels.cu).
// The rest are element-wise grid-stride loops; UnpackQkvGrad's dk and dv
// threads each sum their group's heads in head order, with no atomics.
#include <cuda_runtime.h>

#include <cmath>

#include "worker/device/cuda_launch.cuh"
#include "worker/model/cuda_kernel_util.cuh"
#include "worker/model/cuda_model_kernels.h"

namespace zeroshard::model_cuda {
namespace {

__global__ void RmsNormForwardKernel(const float* x, const float* w, int N, int C, float eps,
                                     float* out, float* rstd) {
  const int64_t row = WarpRow();
  if (row >= N) return;  // Whole warps leave together: the row is warp-uniform.
  const float* xr = x + row * C;
  float* yr = out + row * C;
  float sq = 0.0f;
  for (int c = Lane(); c < C; c += kWarp) sq += xr[c] * xr[c];
  const float s = 1.0f / sqrtf(WarpSum(sq) / static_cast<float>(C) + eps);
  for (int c = Lane(); c < C; c += kWarp) yr[c] = xr[c] * s * w[c];
  if (Lane() == 0) rstd[row] = s;
}

// dx += rstd * (dn - xhat * mean(dn * xhat)), dn = dy * w, xhat = x * rstd.
__global__ void RmsNormBackwardInputKernel(const float* dout, const float* x, const float* w,
                                           const float* rstd, int N, int C, float* dx) {
  const int64_t row = WarpRow();
  if (row >= N) return;
  const float* dy = dout + row * C;
  const float* xr = x + row * C;
  float* dxr = dx + row * C;
  const float s = rstd[row];
  float sum_dn_xhat = 0.0f;
  for (int c = Lane(); c < C; c += kWarp) sum_dn_xhat += dy[c] * w[c] * (xr[c] * s);
  const float mean_dn_xhat = WarpSum(sum_dn_xhat) / static_cast<float>(C);
  for (int c = Lane(); c < C; c += kWarp) dxr[c] += s * (dy[c] * w[c] - xr[c] * s * mean_dn_xhat);
}

// Pair p = (row r = (b, t, h), i < half) rotates x[r, i] and x[r, i + half]
// by angle t's (cos, sin)[i]; `sign` -1 rotates back.
__global__ void RopeKernel(float* x, int T, int H, int D, const float* cos, const float* sin,
                           float sign, int64_t pairs) {
  const int half = D / 2;
  for (int64_t p = First(); p < pairs; p += Stride()) {
    const int64_t r = p / half;
    const int i = static_cast<int>(p - r * half);
    const int64_t t = (r / H) % T;
    float* x1 = x + r * D + i;
    float* x2 = x1 + half;
    const float c = cos[t * half + i], s = sign * sin[t * half + i];
    const float a = *x1, b = *x2;
    *x1 = a * c - b * s;
    *x2 = b * c + a * s;
  }
}

// Element e = (row n, i < I): gate gu[n, i], up gu[n, I + i].
__global__ void SwigluForwardKernel(const float* gu, int I, int64_t n, float* out) {
  for (int64_t e = First(); e < n; e += Stride()) {
    const int64_t at = e + (e / I) * I;  // The gate's index: gu's rows are 2I wide.
    const float g = gu[at];
    out[e] = g / (1.0f + expf(-g)) * gu[at + I];
  }
}

__global__ void SwigluBackwardKernel(const float* gu, const float* dout, int I, int64_t n,
                                     float* dgu) {
  for (int64_t e = First(); e < n; e += Stride()) {
    const int64_t at = e + (e / I) * I;  // The gate's index in gu and dgu.
    const float g = gu[at], u = gu[at + I], d = dout[e];
    const float sig = 1.0f / (1.0f + expf(-g));
    dgu[at + I] = d * (g * sig);
    dgu[at] = d * u * sig * (1.0f + g * (1.0f - sig));
  }
}

// Element e of qkv [N, 3, NH, D]: part 0 copies q, parts 1 and 2 copy head
// h's kv head h / group of k or v.
__global__ void PackQkvKernel(const float* q, const float* k, const float* v, int NH, int KV, int D,
                              int64_t n, float* qkv) {
  const int64_t C = int64_t{NH} * D;
  const int group = NH / KV;
  for (int64_t e = First(); e < n; e += Stride()) {
    const int64_t row = e / (3 * C);
    const int64_t j = e - row * 3 * C;
    const int part = static_cast<int>(j / C);
    const int64_t hi = j - part * C;  // h * D + i.
    if (part == 0) {
      qkv[e] = q[row * C + hi];
    } else {
      const int64_t h = hi / D;
      const int64_t at = (row * KV + h / group) * D + (hi - h * D);
      qkv[e] = part == 1 ? k[at] : v[at];
    }
  }
}

// dq [N, C] = the first C floats of each dqkv row of 3C.
__global__ void CopyQGradKernel(const float* dqkv, int64_t C, int64_t n, float* dq) {
  for (int64_t e = First(); e < n; e += Stride()) {
    const int64_t row = e / C;
    dq[e] = dqkv[row * 3 * C + (e - row * C)];
  }
}

// Element e of dk (or dv) [N, KV, D] = the sum of heads j*group .. (j+1)*group - 1
// of the part at `part` floats into each dqkv row, in head order from 0.
__global__ void GroupSumKernel(const float* dqkv, int64_t part, int NH, int KV, int D, int64_t n,
                               float* out) {
  const int64_t C = int64_t{NH} * D;
  const int group = NH / KV;
  for (int64_t e = First(); e < n; e += Stride()) {
    const int64_t row = e / (int64_t{KV} * D);
    const int64_t ji = e - row * KV * D;  // j * D + i.
    const int64_t j = ji / D;
    const float* src = dqkv + row * 3 * C + part + j * group * D + (ji - j * D);
    float sum = 0.0f;
    for (int h = 0; h < group; ++h) sum += src[int64_t{h} * D];
    out[e] = sum;
  }
}

bool GroupsValid(int NH, int KV) { return KV >= 1 && NH % KV == 0; }

}  // namespace

cudaError_t RmsNormForward(const float* x, const float* w, int N, int C, float eps, float* out,
                           float* rstd, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return cudaSuccess;
  return CheckedLaunch([&] {
    RmsNormForwardKernel<<<RowBlocks(N), kThreads, 0, stream>>>(x, w, N, C, eps, out, rstd);
  });
}

cudaError_t RmsNormBackwardInput(const float* dout, const float* x, const float* w,
                                 const float* rstd, int N, int C, float* dx, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return cudaSuccess;
  return CheckedLaunch([&] {
    RmsNormBackwardInputKernel<<<RowBlocks(N), kThreads, 0, stream>>>(dout, x, w, rstd, N, C, dx);
  });
}

cudaError_t Rope(float* x, int B, int T, int H, int D, const float* cos, const float* sin,
                 bool inverse, cudaStream_t stream) {
  if (D % 2 != 0) return cudaErrorInvalidValue;
  const int64_t pairs = int64_t{B} * T * H * (D / 2);
  if (pairs <= 0) return cudaSuccess;
  return CheckedLaunch([&] {
    RopeKernel<<<ElementBlocks(pairs), kThreads, 0, stream>>>(x, T, H, D, cos, sin,
                                                              inverse ? -1.0f : 1.0f, pairs);
  });
}

cudaError_t SwigluForward(const float* gu, int N, int I, float* out, cudaStream_t stream) {
  const int64_t n = int64_t{N} * I;
  if (n <= 0) return cudaSuccess;
  return CheckedLaunch(
      [&] { SwigluForwardKernel<<<ElementBlocks(n), kThreads, 0, stream>>>(gu, I, n, out); });
}

cudaError_t SwigluBackward(const float* gu, const float* dout, int N, int I, float* dgu,
                           cudaStream_t stream) {
  const int64_t n = int64_t{N} * I;
  if (n <= 0) return cudaSuccess;
  return CheckedLaunch([&] {
    SwigluBackwardKernel<<<ElementBlocks(n), kThreads, 0, stream>>>(gu, dout, I, n, dgu);
  });
}

cudaError_t PackQkv(const float* q, const float* k, const float* v, int N, int NH, int KV, int D,
                    float* qkv, cudaStream_t stream) {
  if (!GroupsValid(NH, KV)) return cudaErrorInvalidValue;
  const int64_t n = int64_t{N} * 3 * NH * D;
  if (n <= 0) return cudaSuccess;
  return CheckedLaunch([&] {
    PackQkvKernel<<<ElementBlocks(n), kThreads, 0, stream>>>(q, k, v, NH, KV, D, n, qkv);
  });
}

cudaError_t UnpackQkvGrad(const float* dqkv, int N, int NH, int KV, int D, float* dq, float* dk,
                          float* dv, cudaStream_t stream) {
  if (!GroupsValid(NH, KV)) return cudaErrorInvalidValue;
  const int64_t C = int64_t{NH} * D;
  const int64_t nq = N * C, nkv = int64_t{N} * KV * D;
  if (nq <= 0) return cudaSuccess;
  return CheckedLaunch([&] {
    CopyQGradKernel<<<ElementBlocks(nq), kThreads, 0, stream>>>(dqkv, C, nq, dq);
    GroupSumKernel<<<ElementBlocks(nkv), kThreads, 0, stream>>>(dqkv, C, NH, KV, D, nkv, dk);
    GroupSumKernel<<<ElementBlocks(nkv), kThreads, 0, stream>>>(dqkv, 2 * C, NH, KV, D, nkv, dv);
  });
}

}  // namespace zeroshard::model_cuda
