#include "worker/device/cuda_check.h"

#include "absl/strings/str_cat.h"

namespace zeroshard {

absl::Status CudaStatus(cudaError_t error, const char* expr, const char* file, int line) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message =
      absl::StrCat(file, ":", line, ": ", expr, ": ", cudaGetErrorName(error), " (",
                   cudaGetErrorString(error), ")");
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorCompatNotSupportedOnDevice:
      return absl::FailedPreconditionError(message);
    case cudaErrorInvalidValue:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

cudaError_t QueryEvent(cudaEvent_t event) {
  const cudaError_t e = cudaEventQuery(event);
  if (e == cudaErrorNotReady) (void)cudaGetLastError();  // Not a failure; not sticky.
  return e;
}

}  // namespace zeroshard
