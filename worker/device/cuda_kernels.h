// Launchers of the CUDA device's element-wise kernels (cuda_kernels.cu). Plain
// C++ over the CUDA runtime types, no abseil, so nvcc compiles the kernels
// without the project's host headers. Use CudaDevice (cuda_device.h) instead.
//
// Element types are ints equal to DType's values (checked in
// cuda_primitives.cc). Each launcher enqueues on `stream` and returns the
// launch's error (cudaSuccess when n == 0: nothing is launched).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace zeroshard::device_internal {

constexpr int kElemFp32 = 1;
constexpr int kElemBf16 = 2;

// dst[i] = src[i]; src_type != dst_type.
cudaError_t LaunchConvert(const void* src, int src_type, void* dst, int dst_type, int64_t n,
                          cudaStream_t stream);
// acc[i] = round_acc(float(acc[i]) + float(x[i])).
cudaError_t LaunchAddInto(void* acc, int acc_type, const void* x, int x_type, int64_t n,
                          cudaStream_t stream);
// x[i] = round(float(x[i]) * alpha).
cudaError_t LaunchScale(void* x, int type, float alpha, int64_t n, cudaStream_t stream);

// Blocks of the first sum-of-squares pass, and so the doubles `partials` must
// hold.
constexpr int kSumSquaresBlocks = 1024;
// *acc += sum of x[i]^2 in double: block partials (each thread a fixed
// grid-stride slice, then a fixed tree in shared memory), then one block
// folds the partials in a fixed tree. The grid depends on n only, so every
// run adds in the same order. `partials` and `acc` are device memory.
cudaError_t LaunchSumSquares(const void* x, int type, int64_t n, double* partials, double* acc,
                             cudaStream_t stream);

}  // namespace zeroshard::device_internal
