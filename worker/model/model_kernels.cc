#include "worker/model/model_kernels.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#ifdef ZEROSHARD_HAVE_CUDA_MODEL
#include "worker/model/cuda_kernels.h"
#endif

namespace zeroshard {

absl::StatusOr<ModelKernels> CreateModelKernels(Device& device, const ModelConfig& model,
                                                bool allow_tf32) {
  ModelKernels k;
  if (device.kind() == DeviceKind::kCpu) {
    k.kernels = &CpuKernels();
    return k;
  }
#ifdef ZEROSHARD_HAVE_CUDA_MODEL
  if (device.kind() == DeviceKind::kCuda) {
    CudaKernelsOptions options;
    options.allow_tf32 = allow_tf32;
    options.vocab = model.vocab;
    ZS_ASSIGN_OR_RETURN(std::unique_ptr<CudaKernels> cuda, CudaKernels::Create(device, options));
    k.owned = std::move(cuda);
    k.kernels = k.owned.get();
    return k;
  }
#endif
  (void)model;
  (void)allow_tf32;
  return absl::FailedPreconditionError(
      absl::StrCat("no model kernels for device ", device.name(), " in this build"));
}

int64_t ModelKernelsScratchBytes(DeviceKind kind, const ModelConfig& model, int B, int T) {
  if (kind == DeviceKind::kCpu) return CpuKernelsScratchBytes();
  const int64_t bt = int64_t{B} * T;
  return 4 * (7 * bt * model.n_embd + int64_t{B} * model.n_head * T * T);
}

}  // namespace zeroshard
