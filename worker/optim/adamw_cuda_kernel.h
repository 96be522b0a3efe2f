// Plain-C++ interface of the AdamW CUDA kernel (no abseil, no CUDA headers),
// so nvcc compiles adamw_cuda.cu without the project's host headers. Use
// AdamWCuda in adamw_cuda.h instead.
#pragma once

#include <cstdint>

namespace zeroshard::optim_internal {

struct AdamWKernelArgs {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps, step_size, inv_sqrt_bc2, decay,
      grad_scale;
  float* master;
  float* m;
  float* v;
  const float* grad;
  int64_t n;
  void* compute_out;
  int compute_kind;  // 0 = none, 1 = fp32, 2 = bf16.
};

// Enqueues the kernel on `stream` (a cudaStream_t); returns the cudaError_t
// of the launch as an int (0 = success).
int LaunchAdamWKernel(const AdamWKernelArgs& args, void* stream);
// The CUDA error string for a code.
const char* CudaErrorString(int code);

}  // namespace zeroshard::optim_internal
