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
//
// Embedding backward, how it works: the positions are sorted by token with
// CUB's radix sort (stable, so each token keeps its positions in order; the
// scratch, 12 bytes a token plus CUB's, is stream-ordered memory of the
// device's pool), then one block per run of equal tokens sums that run's
// rows of dout. Work and memory scale with tokens x width, not with the
// vocabulary, which matters at Llama 3's 128,256 tokens.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cub/device/device_radix_sort.cuh>

#include "worker/device/cuda_launch.cuh"
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

__global__ void IotaKernel(int64_t n, int32_t* out) {
  for (int64_t i = First(); i < n; i += Stride()) out[i] = static_cast<int32_t>(i);
}

// `keys` are the tokens sorted stably (so one token's positions `pos` stay in
// position order). Block (i, column tile) works only where sorted entry i
// starts a run of one in-vocabulary token v: thread c adds dout[pos, c] over
// the run in position order into dwte[v, c]. O(tokens x width) in all.
__global__ void EmbeddingBackwardRunsKernel(const float* dout, const uint32_t* keys,
                                            const int32_t* pos, int64_t n, int C, uint32_t V,
                                            float* dwte) {
  const int64_t i = blockIdx.x;
  const uint32_t v = keys[i];
  if (v >= V || (i > 0 && keys[i - 1] == v)) return;
  const int64_t c = static_cast<int64_t>(blockIdx.y) * kThreads + threadIdx.x;
  if (c >= C) return;
  float sum = 0.0f;
  for (int64_t j = i; j < n && keys[j] == v; ++j) sum += dout[int64_t{pos[j]} * C + c];
  dwte[int64_t{v} * C + c] += sum;
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
  return CheckedLaunch([&] {
    ColumnPartialsKernel<<<grid, block, 0, stream>>>(term, a, x, mean, rstd, N, C, partials);
    ColumnFinishKernel<<<ElementBlocks(C), kThreads, 0, stream>>>(partials, chunks, C, out);
  });
}

cudaError_t EmbeddingForward(const int32_t* tokens, const float* wte, const float* wpe, int B,
                             int T, int C, int V, float* out, cudaStream_t stream) {
  const int64_t n = int64_t{B} * T * C;
  if (n <= 0) return cudaSuccess;
  return CheckedLaunch([&] {
    EmbeddingForwardKernel<<<ElementBlocks(n), kThreads, 0, stream>>>(tokens, wte, wpe, T, C, V, n,
                                                                      out);
  });
}

// The scratch of EmbeddingBackward: sorted tokens, positions before and
// after the sort, then CUB's own temporary storage, each 256-byte aligned.
struct SortScratch {
  static constexpr size_t kAlign = 256;
  static size_t Round(size_t b) { return (b + kAlign - 1) / kAlign * kAlign; }
  explicit SortScratch(int64_t n, size_t cub_bytes)
      : list_bytes(Round(static_cast<size_t>(n) * 4)), cub_bytes(cub_bytes) {}
  size_t total() const { return 3 * list_bytes + cub_bytes; }
  size_t list_bytes;
  size_t cub_bytes;
};

cudaError_t EmbeddingBackward(const float* dout, const int32_t* tokens, int B, int T, int C, int V,
                              float* dwte, float* dwpe, cudaStream_t stream) {
  const int64_t n = int64_t{B} * T;
  if (n <= 0 || C <= 0 || V <= 0) return cudaSuccess;
  const int64_t tiles = (int64_t{C} + kThreads - 1) / kThreads;
  if (tiles > 65535 || n > INT32_MAX) return cudaErrorInvalidValue;  // Grid and CUB limits.
  const auto* keys_in = reinterpret_cast<const uint32_t*>(tokens);   // Negative: >= V, skipped.
  size_t cub_bytes = 0;
  cudaError_t e = cub::DeviceRadixSort::SortPairs(
      nullptr, cub_bytes, keys_in, static_cast<uint32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), static_cast<int>(n), 0,
      32, stream);
  if (e != cudaSuccess) return e;
  const SortScratch layout(n, cub_bytes);
  char* scratch = nullptr;
  e = cudaMallocAsync(reinterpret_cast<void**>(&scratch), layout.total(), stream);
  if (e != cudaSuccess) return e;
  auto* keys = reinterpret_cast<uint32_t*>(scratch);
  auto* pos_in = reinterpret_cast<int32_t*>(scratch + layout.list_bytes);
  auto* pos = reinterpret_cast<int32_t*>(scratch + 2 * layout.list_bytes);
  e = CheckedLaunch([&] { IotaKernel<<<ElementBlocks(n), kThreads, 0, stream>>>(n, pos_in); });
  if (e == cudaSuccess) {
    e = cub::DeviceRadixSort::SortPairs(scratch + 3 * layout.list_bytes, cub_bytes, keys_in, keys,
                                        pos_in, pos, static_cast<int>(n), 0, 32, stream);
  }
  if (e == cudaSuccess) {
    e = CheckedLaunch([&] {
      const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>(tiles));
      EmbeddingBackwardRunsKernel<<<grid, kThreads, 0, stream>>>(dout, keys, pos, n, C,
                                                                 static_cast<uint32_t>(V), dwte);
      if (dwpe == nullptr) return;  // No position embedding (the Llama family).
      EmbeddingBackwardWpeKernel<<<ElementBlocks(int64_t{T} * C), kThreads, 0, stream>>>(dout, B, T,
                                                                                         C, dwpe);
    });
  }
  const cudaError_t freed = cudaFreeAsync(scratch, stream);  // Stream-ordered: after the kernels.
  return e != cudaSuccess ? e : freed;
}

cudaError_t Sum(const float* x, int64_t n, double* sum, cudaStream_t stream) {
  return CheckedLaunch([&] { SumKernel<<<1, kSumThreads, 0, stream>>>(x, n, sum); });
}

}  // namespace zeroshard::model_cuda
