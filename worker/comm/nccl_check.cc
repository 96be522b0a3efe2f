#include "worker/comm/nccl_check.h"

#include "absl/strings/str_cat.h"

namespace zeroshard {

absl::Status GpuStatus(cudaError_t e, const char* expr, const char* file, int line) {
  if (e == cudaSuccess) return absl::OkStatus();
  const std::string msg = absl::StrCat(file, ":", line, ": ", expr, ": ", cudaGetErrorName(e), " (",
                                       cudaGetErrorString(e), ")");
  switch (e) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorCompatNotSupportedOnDevice:
      return absl::FailedPreconditionError(msg);
    case cudaErrorInvalidValue:
      return absl::InvalidArgumentError(msg);
    default:
      return absl::InternalError(msg);
  }
}

absl::Status GpuStatus(ncclResult_t r, const char* expr, const char* file, int line) {
  if (r == ncclSuccess || r == ncclInProgress) return absl::OkStatus();
  const std::string msg = absl::StrCat(file, ":", line, ": ", expr, ": ", ncclGetErrorString(r),
                                       " (", static_cast<int>(r), ")");
  switch (r) {
    case ncclSystemError:
    case ncclRemoteError:
      return absl::UnavailableError(msg);
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::InvalidArgumentError(msg);
    default:
      return absl::InternalError(msg);
  }
}

}  // namespace zeroshard
