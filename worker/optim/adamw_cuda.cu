// AdamW shard update on the GPU: one thread per element, grid-stride loop.
// Same formula and operation order as adamw.h; the explicit round-to-nearest
// intrinsics (__fmul_rn, __fadd_rn, ...) are never contracted into FMA, so
// the kernel matches the CPU reference bit for bit (nvcc fuses a*b+c by
// default; see the CUDA C Programming Guide, "Floating-Point Standard").
#include <cuda_runtime.h>

#include "worker/device/cuda_launch.cuh"
#include "worker/optim/adamw_cuda_kernel.h"

namespace zeroshard::optim_internal {
namespace {

__device__ unsigned short ToBf16(float f) {
  const unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<unsigned short>((u >> 16) | 0x40u);
  return static_cast<unsigned short>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

__global__ void AdamWKernel(AdamWKernelArgs a) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < a.n;
       i += stride) {
    const float g = __fmul_rn(a.grad[i], a.grad_scale);
    const float m = __fadd_rn(__fmul_rn(a.beta1, a.m[i]), __fmul_rn(a.one_minus_beta1, g));
    const float v =
        __fadd_rn(__fmul_rn(a.beta2, a.v[i]), __fmul_rn(a.one_minus_beta2, __fmul_rn(g, g)));
    const float denom = __fadd_rn(__fmul_rn(__fsqrt_rn(v), a.inv_sqrt_bc2), a.eps);
    float p = a.master[i];
    p = __fsub_rn(__fmul_rn(p, a.decay), __fmul_rn(a.step_size, __fdiv_rn(m, denom)));
    a.m[i] = m;
    a.v[i] = v;
    a.master[i] = p;
    if (a.compute_kind == 1) static_cast<float*>(a.compute_out)[i] = p;
    if (a.compute_kind == 2) static_cast<unsigned short*>(a.compute_out)[i] = ToBf16(p);
  }
}

}  // namespace

int LaunchAdamWKernel(const AdamWKernelArgs& args, void* stream) {
  if (args.n <= 0) return 0;
  constexpr int kThreads = 256;
  const int64_t wanted = (args.n + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(wanted < 65535 * 8 ? wanted : 65535 * 8);
  return static_cast<int>(CheckedLaunch(
      [&] { AdamWKernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(args); }));
}

const char* CudaErrorString(int code) { return cudaGetErrorString(static_cast<cudaError_t>(code)); }

}  // namespace zeroshard::optim_internal
