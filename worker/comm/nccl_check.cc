#include "worker/comm/nccl_check.h"

#include "absl/strings/str_cat.h"
#include "worker/device/cuda_check.h"

namespace zeroshard {

// One mapping of CUDA codes for the whole project: the device layer's.
absl::Status GpuStatus(cudaError_t e, const char* expr, const char* file, int line) {
  return CudaStatus(e, expr, file, line);
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
