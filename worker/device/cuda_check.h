// CUDA runtime return codes as absl::Status, through one macro with a
// file:line breadcrumb (STYLE.md point 13; worker/comm/nccl_check.h is the
// NCCL backend's twin). Included only by zeroshard_device_cuda's sources.
#pragma once

#include <cuda_runtime.h>

#include "absl/status/status.h"

namespace zeroshard {

// OK for cudaSuccess. Else, by cause: out of memory: RESOURCE_EXHAUSTED; no
// device or driver: FAILED_PRECONDITION; bad value: INVALID_ARGUMENT; else
// INTERNAL. The message is "file:line: expr: cudaErrorName (description)".
absl::Status CudaStatus(cudaError_t error, const char* expr, const char* file, int line);

// cudaEventQuery(event), except that a busy event's cudaErrorNotReady is not
// left behind as the thread's last error ([Note: launch checks],
// cuda_launch.cuh): cudaSuccess when complete, cudaErrorNotReady while
// work before it runs, another code on failure. Every poll of an event in
// the project goes through this (CudaDevice's events, the NCCL backend's).
cudaError_t QueryEvent(cudaEvent_t event);

}  // namespace zeroshard

#define ZS_CUDA_RETURN_IF_ERROR(expr)                                                            \
  do {                                                                                           \
    ::absl::Status zs_cuda_status_ = ::zeroshard::CudaStatus((expr), #expr, __FILE__, __LINE__); \
    if (!zs_cuda_status_.ok()) return zs_cuda_status_;                                           \
  } while (0)
