#include "worker/model/model_kernels.h"

#include <algorithm>
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

int64_t ModelKernelsScratchBytes(DeviceKind kind, const ModelConfig& model, int B, int T) {
  if (kind == DeviceKind::kCpu) return CpuKernelsScratchBytes();
  const int64_t bt = int64_t{B} * T, C = model.n_embd;
  const int64_t attention = 7 * bt * C + int64_t{B} * model.n_head * T * T;
  // Every matmul's M K + K N is at most (B T + C) W + B T C, W = max(4C, V).
  const int64_t wide = std::max<int64_t>(4 * C, model.vocab);
  const int64_t bf16_matmul = ((bt + C) * wide + bt * C + 1) / 2 + 16;  // + B's alignment.
  return 4 * std::max(attention, bf16_matmul);
}

}  // namespace zeroshard
