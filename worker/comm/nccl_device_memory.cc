#include "worker/comm/nccl_device_memory.h"

#include "worker/comm/nccl_check.h"

namespace zeroshard {

absl::StatusOr<void*> DeviceAlloc(int device, size_t bytes) {
  ZS_GPU_RETURN_IF_ERROR(cudaSetDevice(device));
  void* p = nullptr;
  ZS_GPU_RETURN_IF_ERROR(cudaMalloc(&p, bytes));
  return p;
}

absl::Status DeviceFree(int device, void* ptr) {
  ZS_GPU_RETURN_IF_ERROR(cudaSetDevice(device));
  ZS_GPU_RETURN_IF_ERROR(cudaFree(ptr));
  return absl::OkStatus();
}

absl::Status CopyToDevice(int device, void* device_dst, const void* host_src, size_t bytes) {
  ZS_GPU_RETURN_IF_ERROR(cudaSetDevice(device));
  ZS_GPU_RETURN_IF_ERROR(cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice));
  return absl::OkStatus();
}

absl::Status CopyToHost(int device, void* host_dst, const void* device_src, size_t bytes) {
  ZS_GPU_RETURN_IF_ERROR(cudaSetDevice(device));
  ZS_GPU_RETURN_IF_ERROR(cudaMemcpy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost));
  return absl::OkStatus();
}

}  // namespace zeroshard
