// Device memory helpers for tests and benchmarks of the NCCL backend, so they
// need not include CUDA headers. Each call first selects `device`.
#pragma once

#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zeroshard {

absl::StatusOr<void*> DeviceAlloc(int device, size_t bytes);
absl::Status DeviceFree(int device, void* ptr);
// Synchronous copies (cudaMemcpy), bytes in each direction.
absl::Status CopyToDevice(int device, void* device_dst, const void* host_src, size_t bytes);
absl::Status CopyToHost(int device, void* host_dst, const void* device_src, size_t bytes);

}  // namespace zeroshard
