#include "worker/model/model_kernels.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#ifdef ZEROSHARD_HAVE_CUDA_MODEL
#include "worker/model/cuda_kernels.h"
#endif

namespace zeroshard {

absl::StatusOr<ModelKernels> CreateModelKernels(Device& device, const ModelConfig& model,
                                                DType compute_dtype) {
  ModelKernels k;
  if (device.kind() == DeviceKind::kCpu) {
    k.kernels = &CpuKernels();
    return k;
  }
#ifdef ZEROSHARD_HAVE_CUDA_MODEL
  if (device.kind() == DeviceKind::kCuda) {
    CudaKernelsOptions options;
    options.vocab = model.vocab;
    options.bf16_matmul = compute_dtype == DType::kBf16;
    ZS_ASSIGN_OR_RETURN(std::unique_ptr<CudaKernels> cuda, CudaKernels::Create(device, options));
    k.owned = std::move(cuda);
    k.kernels = k.owned.get();
    return k;
  }
#endif
  (void)model;
  (void)compute_dtype;
  return absl::FailedPreconditionError(
      absl::StrCat("no model kernels for device ", device.name(), " in this build"));
}

int64_t ModelKernels::scratch_held() const {
#ifdef ZEROSHARD_HAVE_CUDA_MODEL
  if (const auto* cuda = dynamic_cast<const CudaKernels*>(owned.get())) {
    return cuda->scratch_bytes();
  }
#endif
  return 0;
}

}  // namespace zeroshard
