// Device helpers shared by the model's .cu files (nvcc only): grid-stride
// indexing in int64, launch sizes, and warp reductions.
//
// The warp reductions are xor butterflies: at each step lanes i and i^o both
// form v_i + v_(i^o), which is the same float either way round (IEEE
// addition commutes), so every lane ends with the same bits and the order
// depends on nothing but the lane layout: deterministic.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

// In model_cuda itself: only the .cu files include this header.
namespace zeroshard::model_cuda {

constexpr int kWarp = 32;
constexpr int kThreads = 256;                     // Threads of a block.
constexpr int kWarpsPerBlock = kThreads / kWarp;  // Rows of a warp-per-row block.
constexpr int64_t kMaxBlocks = 65535 * 8;         // Grid-stride loops cap their grid.

__device__ __forceinline__ int64_t First() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t Stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// This warp's row in a warp-per-row launch (RowBlocks blocks of kThreads).
__device__ __forceinline__ int64_t WarpRow() {
  return static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / kWarp;
}
__device__ __forceinline__ int Lane() { return static_cast<int>(threadIdx.x % kWarp); }

__device__ __forceinline__ float WarpSum(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float WarpMax(float v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Blocks of an element-wise grid-stride launch over n elements.
inline int ElementBlocks(int64_t n) {
  const int64_t wanted = (n + kThreads - 1) / kThreads;
  return static_cast<int>(wanted < kMaxBlocks ? wanted : kMaxBlocks);
}
// Blocks of a warp-per-row launch over `rows` rows (one warp each).
inline int RowBlocks(int64_t rows) {
  return static_cast<int>((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
}

}  // namespace zeroshard::model_cuda
