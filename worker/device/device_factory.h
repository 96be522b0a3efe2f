// A Device from a flag (--device cpu|cuda|auto), for code that must not
// include a backend header.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/device/device.h"

namespace zeroshard {

struct DeviceOptions {
  std::string kind = "cpu";  // cpu | cuda | auto (CUDA when a GPU is visible).
  int ordinal = -1;          // CUDA device; -1: LOCAL_RANK mod visible GPUs, else 0.
  int cpu_threads = 0;       // CPU device's AdamW/SumSquares threads; 0 = hardware (max 16).
};

// Errors: INVALID_ARGUMENT for another kind, a negative cpu_threads, an
// ordinal < -1 or one past the visible devices; FAILED_PRECONDITION for
// "cuda" when this build has no CUDA or this process sees no GPU (the
// message names cudaGetDeviceCount's answer); else CudaDevice::Create's.
absl::StatusOr<std::unique_ptr<Device>> CreateDevice(const DeviceOptions& options);

// The ordinal DeviceOptions::ordinal selects among `visible` (> 0) devices;
// `local_rank` is $LOCAL_RANK or null. A LOCAL_RANK that is not a
// non-negative integer is INVALID_ARGUMENT. Pure, for tests.
absl::StatusOr<int> ResolveCudaOrdinal(int requested, int visible, const char* local_rank);

// CUDA devices this process sees (CUDA_VISIBLE_DEVICES applies); 0 without
// a GPU or driver, or in a build without CUDA.
int VisibleCudaDevices();

// `zeroshard launch --device cuda --workers N` on `visible` GPUs: worker r
// gets LOCAL_RANK=r, so GPU r mod visible (ResolveCudaOrdinal). More ranks
// than GPUs puts two ranks on one GPU, which NCCL refuses ("Duplicate GPU
// detected"): with `backend` "nccl" or "auto" (NCCL on CUDA) that is
// FAILED_PRECONDITION naming the counts and --backend host-staged; "gloo"
// and "host-staged" stage collectives through host memory and may share.
// Pure, for tests.
absl::Status CheckRanksPerGpu(int workers, int visible, const std::string& backend);

}  // namespace zeroshard
