// Element-wise kernels of the CUDA device: one thread per element over a
// grid-stride loop. Arithmetic uses the explicit round-to-nearest intrinsics
// (__fadd_rn, __fmul_rn, ...) and the target compiles with --fmad=false, so
// every result is the single IEEE operation the CPU device performs and the
// two agree bit for bit (see worker/optim/adamw_cuda.cu for the same rule).
#include <cuda_runtime.h>

#include "worker/device/cuda_kernels.h"
#include "worker/device/cuda_launch.cuh"

namespace zeroshard::device_internal {
namespace {

constexpr int kThreads = 256;  // A power of two: the reductions halve it.
using Bf16 = unsigned short;

// common/dtype.h's FloatToBf16: round to nearest even, NaN kept quiet.
__device__ __forceinline__ Bf16 ToBf16(float f) {
  const unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<Bf16>((u >> 16) | 0x40u);
  return static_cast<Bf16>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

__device__ __forceinline__ float Load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float Load(const Bf16* p, int64_t i) {
  return __uint_as_float(static_cast<unsigned int>(p[i]) << 16);
}
__device__ __forceinline__ void Store(float* p, int64_t i, float f) { p[i] = f; }
__device__ __forceinline__ void Store(Bf16* p, int64_t i, float f) { p[i] = ToBf16(f); }

__device__ __forceinline__ int64_t First() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t Stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

template <typename S, typename D>
__global__ void ConvertKernel(const S* src, D* dst, int64_t n) {
  for (int64_t i = First(); i < n; i += Stride()) Store(dst, i, Load(src, i));
}

template <typename A, typename X>
__global__ void AddIntoKernel(A* acc, const X* x, int64_t n) {
  for (int64_t i = First(); i < n; i += Stride())
    Store(acc, i, __fadd_rn(Load(acc, i), Load(x, i)));
}

template <typename T>
__global__ void ScaleKernel(T* x, float alpha, int64_t n) {
  for (int64_t i = First(); i < n; i += Stride()) Store(x, i, __fmul_rn(Load(x, i), alpha));
}

// Sums shared[0..kThreads) into shared[0] in a fixed halving order.
__device__ void BlockTreeSum(double* shared) {
  __syncthreads();
  for (int width = kThreads / 2; width > 0; width /= 2) {
    if (threadIdx.x < width)
      shared[threadIdx.x] = __dadd_rn(shared[threadIdx.x], shared[threadIdx.x + width]);
    __syncthreads();
  }
}

template <typename T>
__global__ void SumSquaresPartialsKernel(const T* x, int64_t n, double* partials) {
  __shared__ double shared[kThreads];
  double sum = 0.0;
  for (int64_t i = First(); i < n; i += Stride()) {
    const double f = Load(x, i);
    sum = __dadd_rn(sum, __dmul_rn(f, f));  // A float squared is exact in double.
  }
  shared[threadIdx.x] = sum;
  BlockTreeSum(shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = shared[0];
}

// One block of kThreads: thread t folds partials t, t + kThreads, ... in order.
__global__ void SumSquaresFinishKernel(const double* partials, int count, double* acc) {
  __shared__ double shared[kThreads];
  double sum = 0.0;
  for (int i = threadIdx.x; i < count; i += kThreads) sum = __dadd_rn(sum, partials[i]);
  shared[threadIdx.x] = sum;
  BlockTreeSum(shared);
  if (threadIdx.x == 0) *acc = __dadd_rn(*acc, shared[0]);
}

int Blocks(int64_t n, int64_t max_blocks) {
  const int64_t wanted = (n + kThreads - 1) / kThreads;
  return static_cast<int>(wanted < max_blocks ? wanted : max_blocks);
}
constexpr int64_t kMaxBlocks = 65535 * 8;

}  // namespace

cudaError_t LaunchConvert(const void* src, int src_type, void* dst, int dst_type, int64_t n,
                          cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int blocks = Blocks(n, kMaxBlocks);
  if (src_type == kElemFp32 && dst_type == kElemBf16) {
    return CheckedLaunch([&] {
      ConvertKernel<<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(src),
                                                     static_cast<Bf16*>(dst), n);
    });
  }
  if (src_type == kElemBf16 && dst_type == kElemFp32) {
    return CheckedLaunch([&] {
      ConvertKernel<<<blocks, kThreads, 0, stream>>>(static_cast<const Bf16*>(src),
                                                     static_cast<float*>(dst), n);
    });
  }
  return cudaErrorInvalidValue;
}

cudaError_t LaunchAddInto(void* acc, int acc_type, const void* x, int x_type, int64_t n,
                          cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int b = Blocks(n, kMaxBlocks);
  const bool acc32 = acc_type == kElemFp32, x32 = x_type == kElemFp32;
  float* af = static_cast<float*>(acc);
  Bf16* ah = static_cast<Bf16*>(acc);
  const float* xf = static_cast<const float*>(x);
  const Bf16* xh = static_cast<const Bf16*>(x);
  return CheckedLaunch([&] {
    if (acc32 && x32) AddIntoKernel<<<b, kThreads, 0, stream>>>(af, xf, n);
    if (acc32 && !x32) AddIntoKernel<<<b, kThreads, 0, stream>>>(af, xh, n);
    if (!acc32 && x32) AddIntoKernel<<<b, kThreads, 0, stream>>>(ah, xf, n);
    if (!acc32 && !x32) AddIntoKernel<<<b, kThreads, 0, stream>>>(ah, xh, n);
  });
}

cudaError_t LaunchScale(void* x, int type, float alpha, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int blocks = Blocks(n, kMaxBlocks);
  return CheckedLaunch([&] {
    if (type == kElemFp32) {
      ScaleKernel<<<blocks, kThreads, 0, stream>>>(static_cast<float*>(x), alpha, n);
    } else {
      ScaleKernel<<<blocks, kThreads, 0, stream>>>(static_cast<Bf16*>(x), alpha, n);
    }
  });
}

cudaError_t LaunchSumSquares(const void* x, int type, int64_t n, double* partials, double* acc,
                             cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int blocks = Blocks(n, kSumSquaresBlocks);
  return CheckedLaunch([&] {
    if (type == kElemFp32) {
      SumSquaresPartialsKernel<<<blocks, kThreads, 0, stream>>>(static_cast<const float*>(x), n,
                                                                partials);
    } else {
      SumSquaresPartialsKernel<<<blocks, kThreads, 0, stream>>>(static_cast<const Bf16*>(x), n,
                                                                partials);
    }
    SumSquaresFinishKernel<<<1, kThreads, 0, stream>>>(partials, blocks, acc);
  });
}

}  // namespace zeroshard::device_internal
