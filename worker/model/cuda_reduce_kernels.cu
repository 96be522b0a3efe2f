// Parameter-gradient reductions of the CUDA model backend: column sums (bias,
// LayerNorm and RMSNorm gradients) and the embedding backward. No atomics:
// each sum runs in an order fixed by the shape, so the same inputs give the
// same bits every run (the determinism the issue asks of parameter
// gradients).
//
// Column sums, how it works: rows are cut into chunks of kColumnChunkRows.
// Pass 1 gives each (chunk, 32-column tile) one block of 32 x 8 threads;
// thread (tx, ty) sums rows ty, ty + 8, ... of its chunk down column tx in
// row order, then thread ty = 0 adds the 8 row-slices in ty order into
// partials[chunk, c]. Pass 2 gives each column one thread that adds the
// partials in chunk order into out[c].
#include <cuda_runtime.h>

#include <cmath>

#include "worker/model/cuda_kernel_util.cuh"
#include "worker/model/cuda_model_kernels.h"

namespace zeroshard::model_cuda {
namespace {

constexpr int kSliceRows = 8;  // blockDim.y of pass 1.

// The term of ColumnTerm `term` at element i of row n.
__device__ __forceinline__ float Term(ColumnTerm term, const float* a, const float* x,
                                      const float* mean, const float* rstd, int64_t n, int64_t i) {
  switch (term) {
    case ColumnTerm::kNormGrad:
      return a[i] * ((x[i] - mean[n]) * rstd[n]);
    case ColumnTerm::kRmsGrad:
      return a[i] * (x[i] * rstd[n]);
    case ColumnTerm::kValue:
      break;
  }
  return a[i];
}

__global__ void ColumnPartialsKernel(ColumnTerm term, const float* a, const float* x,
                                     const float* mean, const float* rstd, int N, int C,
                                     float* partials) {
  __shared__ float slice[kSliceRows][kWarp];
  const int c = static_cast<int>(blockIdx.y) * kWarp + static_cast<int>(threadIdx.x);
  const int64_t chunk = blockIdx.x;
  const int64_t begin = chunk * kColumnChunkRows;
  const int64_t end = begin + kColumnChunkRows < N ? begin + kColumnChunkRows : N;
  float sum = 0.0f;
  if (c < C) {
    for (int64_t n = begin + threadIdx.y; n < end; n += kSliceRows) {
      const int64_t i = n * C + c;
      sum += Term(term, a, x, mean, rstd, n, i);
    }
  }
  slice[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    float total = 0.0f;
    for (int s = 0; s < kSliceRows; ++s) total += slice[s][threadIdx.x];
    partials[chunk * C + c] = total;
  }
}

__global__ void ColumnFinishKernel(const float* partials, int64_t chunks, int C, float* out) {
  for (int64_t c = First(); c < C; c += Stride()) {
    float total = 0.0f;
    for (int64_t k = 0; k < chunks; ++k) total += partials[k * C + c];
    out[c] += total;
  }
}

__global__ void EmbeddingForwardKernel(const int32_t* tokens, const float* wte, const float* wpe,
                                       int T, int C, int V, int64_t n, float* out) {
  for (int64_t i = First(); i < n; i += Stride()) {
    const int64_t bt = i / C;
    const int64_t c = i - bt * C;
    const int64_t t = bt % T;
    const int32_t token = tokens[bt];
    if (token < 0 || token >= V) {
      out[i] = NAN;
    } else {
      // Without wpe the row is copied, not added to 0 (which would turn -0 into +0).
      const float e = wte[int64_t{token} * C + c];
      out[i] = wpe == nullptr ? e : e + wpe[t * C + c];
    }
  }
}

// Block (v, column tile): thread c scans every position's token (a tile of
// kThreads tokens in shared memory at a time, the same for the whole block)
// and adds dout[n, c] in position order where the token is v.
__global__ void EmbeddingBackwardWteKernel(const float* dout, const int32_t* tokens, int64_t n,
                                           int C, float* dwte) {
  __shared__ int32_t tile[kThreads];
  const int32_t v = static_cast<int32_t>(blockIdx.x);
  const int64_t c = static_cast<int64_t>(blockIdx.y) * kThreads + threadIdx.x;
  float sum = 0.0f;
  for (int64_t base = 0; base < n; base += kThreads) {
    const int64_t mine = base + threadIdx.x;
    tile[threadIdx.x] = mine < n ? tokens[mine] : -1;
    __syncthreads();
    const int count = n - base < kThreads ? static_cast<int>(n - base) : kThreads;
    if (c < C) {
      for (int j = 0; j < count; ++j) {
        if (tile[j] == v) sum += dout[(base + j) * C + c];
      }
    }
    __syncthreads();  // The tile is overwritten next round.
  }
  if (c < C) dwte[int64_t{v} * C + c] += sum;
}

// Thread (t, c) adds dout[b, t, c] over b in order.
__global__ void EmbeddingBackwardWpeKernel(const float* dout, int B, int T, int C, float* dwpe) {
  const int64_t n = int64_t{T} * C;
  for (int64_t i = First(); i < n; i += Stride()) {
    float sum = 0.0f;
    for (int b = 0; b < B; ++b) sum += dout[int64_t{b} * n + i];
    dwpe[i] += sum;
  }
}

constexpr int kSumThreads = 256;

__global__ void SumKernel(const float* x, int64_t n, double* sum) {
  __shared__ double part[kSumThreads];
  double acc = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += kSumThreads) acc += x[i];
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int half = kSumThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *sum = part[0];
}

}  // namespace

cudaError_t ColumnSums(ColumnTerm term, const float* a, const float* x, const float* mean,
                       const float* rstd, int N, int C, float* partials, float* out,
                       cudaStream_t stream) {
  if (N <= 0 || C <= 0) return cudaSuccess;
  const int64_t chunks = ColumnPartials(N);
  const int64_t tiles = (int64_t{C} + kWarp - 1) / kWarp;
  if (tiles > 65535) return cudaErrorInvalidValue;  // gridDim.y's limit.
  const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(tiles));
  const dim3 block(kWarp, kSliceRows);
  ColumnPartialsKernel<<<grid, block, 0, stream>>>(term, a, x, mean, rstd, N, C, partials);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  ColumnFinishKernel<<<ElementBlocks(C), kThreads, 0, stream>>>(partials, chunks, C, out);
  return cudaGetLastError();
}

cudaError_t EmbeddingForward(const int32_t* tokens, const float* wte, const float* wpe, int B,
                             int T, int C, int V, float* out, cudaStream_t stream) {
  const int64_t n = int64_t{B} * T * C;
  if (n <= 0) return cudaSuccess;
  EmbeddingForwardKernel<<<ElementBlocks(n), kThreads, 0, stream>>>(tokens, wte, wpe, T, C, V, n,
                                                                    out);
  return cudaGetLastError();
}

cudaError_t EmbeddingBackward(const float* dout, const int32_t* tokens, int B, int T, int C, int V,
                              float* dwte, float* dwpe, cudaStream_t stream) {
  const int64_t n = int64_t{B} * T;
  if (n <= 0 || C <= 0 || V <= 0) return cudaSuccess;
  const int64_t tiles = (int64_t{C} + kThreads - 1) / kThreads;
  if (tiles > 65535) return cudaErrorInvalidValue;  // gridDim.y's limit.
  const dim3 grid(static_cast<unsigned>(V), static_cast<unsigned>(tiles));
  EmbeddingBackwardWteKernel<<<grid, kThreads, 0, stream>>>(dout, tokens, n, C, dwte);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  if (dwpe == nullptr) return cudaSuccess;  // No position embedding (the Llama family).
  EmbeddingBackwardWpeKernel<<<ElementBlocks(int64_t{T} * C), kThreads, 0, stream>>>(dout, B, T, C,
                                                                                     dwpe);
  return cudaGetLastError();
}

cudaError_t Sum(const float* x, int64_t n, double* sum, cudaStream_t stream) {
  SumKernel<<<1, kSumThreads, 0, stream>>>(x, n, sum);
  return cudaGetLastError();
}

}  // namespace zeroshard::model_cuda
