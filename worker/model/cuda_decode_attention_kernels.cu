// Kernels::DecodeAttention on the GPU (kernels.h; the CPU twin is
// cpu_decode_attention.cc): a copy kernel stores the new keys and values in
// the cache, then one warp per (new token i, head h) attends to positions
// 0 .. pos + i with the online softmax of Milakov & Gimelshein (2018,
// "Online normalizer calculation for softmax", algorithm 3): positions in
// tiles of 32, lane l scoring position tile + l, the running maximum and
// sum rescaling the output accumulators when the maximum grows. No scratch
// memory, and every sum is taken in an order fixed by the shape, so the
// bits are the same every run.
#include <cuda_runtime.h>

#include <cmath>

#include "worker/device/cuda_launch.cuh"
#include "worker/model/cuda_kernel_util.cuh"
#include "worker/model/cuda_model_kernels.h"

namespace zeroshard::model_cuda {
namespace {

constexpr int kDimsPerLane = kMaxDecodeHeadDim / kWarp;

__global__ void StoreKvKernel(const float* k_new, const float* v_new, int64_t kv_stride, int pos,
                              int KV, int D, int P, int64_t n, float* k_cache, float* v_cache) {
  for (int64_t e = First(); e < n; e += Stride()) {
    const int64_t d = e % D, g = (e / D) % KV, i = e / (int64_t{D} * KV);
    const int64_t src = i * kv_stride + g * D + d;
    const int64_t dst = (g * P + pos + i) * D + d;
    k_cache[dst] = k_new[src];
    v_cache[dst] = v_new[src];
  }
}

__global__ void DecodeAttendKernel(const float* q, int64_t q_stride, const float* k_cache,
                                   const float* v_cache, int pos, int n, int NH, int KV, int D,
                                   int P, float scale, float* out) {
  const int64_t row = WarpRow();
  if (row >= int64_t{n} * NH) return;
  const int i = static_cast<int>(row / NH), h = static_cast<int>(row % NH);
  const int64_t g = h / (NH / KV);
  const float* qh = q + i * q_stride + int64_t{h} * D;
  const float* K = k_cache + g * P * D;
  const float* V = v_cache + g * P * D;
  const int len = pos + i + 1, lane = Lane();
  float acc[kDimsPerLane] = {};
  float m = -INFINITY, l = 0.0f;
  for (int tile = 0; tile < len; tile += kWarp) {
    const int j = tile + lane;
    float s = -INFINITY;
    if (j < len) {
      float dot = 0.0f;
      for (int d = 0; d < D; ++d) dot += qh[d] * K[int64_t{j} * D + d];
      s = dot * scale;
    }
    const float top = fmaxf(m, WarpMax(s));
    const float factor = expf(m - top);  // 0 at the first tile (m = -inf).
    const float p = j < len ? expf(s - top) : 0.0f;
    l = l * factor + WarpSum(p);
    for (int k = 0; k < kDimsPerLane; ++k) acc[k] *= factor;
    const int valid = min(kWarp, len - tile);
    for (int jj = 0; jj < valid; ++jj) {
      const float pj = __shfl_sync(0xffffffffu, p, jj);
      const float* v = V + int64_t{tile + jj} * D;
      for (int k = 0; k < kDimsPerLane; ++k) {
        const int d = lane + k * kWarp;
        if (d < D) acc[k] += pj * v[d];
      }
    }
    m = top;
  }
  float* o = out + (int64_t{i} * NH + h) * D;
  for (int k = 0; k < kDimsPerLane; ++k) {
    const int d = lane + k * kWarp;
    if (d < D) o[d] = acc[k] / l;
  }
}

}  // namespace

cudaError_t DecodeAttention(const float* q, int64_t q_stride, const float* k_new,
                            const float* v_new, int64_t kv_stride, int pos, int n, int NH, int KV,
                            int D, int P, float* k_cache, float* v_cache, float* out,
                            cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  if (KV < 1 || NH % KV != 0 || D < 1 || D > kMaxDecodeHeadDim || pos < 0 || pos + n > P) {
    return cudaErrorInvalidValue;
  }
  const int64_t elements = int64_t{n} * KV * D;
  const float scale = 1.0f / sqrtf(static_cast<float>(D));
  return CheckedLaunch([&] {
    StoreKvKernel<<<ElementBlocks(elements), kThreads, 0, stream>>>(
        k_new, v_new, kv_stride, pos, KV, D, P, elements, k_cache, v_cache);
    DecodeAttendKernel<<<RowBlocks(int64_t{n} * NH), kThreads, 0, stream>>>(
        q, q_stride, k_cache, v_cache, pos, n, NH, KV, D, P, scale, out);
  });
}

}  // namespace zeroshard::model_cuda
