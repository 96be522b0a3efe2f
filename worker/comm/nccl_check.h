// CUDA and NCCL return codes as absl::Status, through one macro with a
// file:line breadcrumb (STYLE.md point 13; NCCL src/include/checks.h).
// Included only by nccl_*.cc.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include "absl/status/status.h"

namespace zeroshard {

// OK for cudaSuccess; else as CudaStatus (worker/device/cuda_check.h): out
// of memory: RESOURCE_EXHAUSTED; no device or driver: FAILED_PRECONDITION;
// bad value: INVALID_ARGUMENT; else INTERNAL.
absl::Status GpuStatus(cudaError_t e, const char* expr, const char* file, int line);
// OK for ncclSuccess and ncclInProgress (non-blocking communicators report
// progress through ncclCommGetAsyncError); system/remote errors: UNAVAILABLE;
// invalid argument/usage: INVALID_ARGUMENT; else INTERNAL.
absl::Status GpuStatus(ncclResult_t r, const char* expr, const char* file, int line);

}  // namespace zeroshard

#define ZS_GPU_RETURN_IF_ERROR(expr)                                                           \
  do {                                                                                         \
    ::absl::Status zs_gpu_status_ = ::zeroshard::GpuStatus((expr), #expr, __FILE__, __LINE__); \
    if (!zs_gpu_status_.ok()) return zs_gpu_status_;                                           \
  } while (0)
