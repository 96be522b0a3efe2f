#include "worker/optim/adamw_cuda.h"

#include "absl/strings/str_cat.h"
#include "worker/optim/adamw_cuda_kernel.h"

namespace zeroshard {

absl::Status AdamWCuda(const AdamWHyperparams& hp, int64_t step, float grad_scale,
                       const AdamWShard& shard, void* stream) {
  if (shard.n < 0) return absl::InvalidArgumentError("AdamWCuda: shard.n is negative");
  if (step < 1) return absl::InvalidArgumentError("AdamWCuda: step must be >= 1");
  if (shard.compute_dtype != DType::kFp32 && shard.compute_dtype != DType::kBf16) {
    return absl::InvalidArgumentError("AdamWCuda: compute_dtype must be fp32 or bf16");
  }
  const AdamWScalars s = MakeAdamWScalars(hp, step, grad_scale);
  optim_internal::AdamWKernelArgs a{
      s.beta1,      s.one_minus_beta1, s.beta2,           s.one_minus_beta2,
      s.eps,        s.step_size,       s.inv_sqrt_bc2,    s.decay,
      s.grad_scale, shard.master,      shard.m,           shard.v,
      shard.grad,   shard.n,           shard.compute_out, 0};
  if (shard.compute_out != nullptr) a.compute_kind = shard.compute_dtype == DType::kFp32 ? 1 : 2;
  const int err = optim_internal::LaunchAdamWKernel(a, stream);
  if (err != 0) {
    return absl::InternalError(
        absl::StrCat("AdamWCuda: kernel launch failed: ", optim_internal::CudaErrorString(err)));
  }
  return absl::OkStatus();
}

}  // namespace zeroshard
