#include "worker/device/device_factory.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "worker/device/cpu_device.h"
#ifdef ZEROSHARD_HAVE_CUDA_DEVICE
#include "worker/device/cuda_device.h"
#endif

namespace zeroshard {
namespace {

absl::StatusOr<std::unique_ptr<Device>> CreateCuda(const DeviceOptions& options, bool required) {
#ifdef ZEROSHARD_HAVE_CUDA_DEVICE
  const CudaVisibility visible = QueryCudaDevices();
  if (visible.count == 0) {
    if (!required) return std::make_unique<CpuDevice>(options.cpu_threads);
    return absl::FailedPreconditionError(absl::StrCat(
        "--device cuda: no CUDA device visible (cudaGetDeviceCount: ", visible.error, ")"));
  }
  ZS_ASSIGN_OR_RETURN(const int ordinal, ResolveCudaOrdinal(options.ordinal, visible.count,
                                                            std::getenv("LOCAL_RANK")));
  ZS_ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> device, CudaDevice::Create(ordinal));
  return std::unique_ptr<Device>(std::move(device));
#else
  if (!required) return std::make_unique<CpuDevice>(options.cpu_threads);
  return absl::FailedPreconditionError(
      "--device cuda: this build has no CUDA (configure where nvcc exists, ZEROSHARD_CUDA=ON)");
#endif
}

}  // namespace

absl::StatusOr<int> ResolveCudaOrdinal(int requested, int visible, const char* local_rank) {
  if (requested >= visible || requested < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CUDA device ordinal ", requested, " out of range: ", visible, " CUDA device(s) visible"));
  }
  if (requested >= 0) return requested;
  if (local_rank == nullptr || *local_rank == '\0') return 0;
  int rank = -1;
  if (!absl::SimpleAtoi(local_rank, &rank) || rank < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("LOCAL_RANK must be a non-negative integer, got \"", local_rank, "\""));
  }
  return rank % visible;
}

int VisibleCudaDevices() {
#ifdef ZEROSHARD_HAVE_CUDA_DEVICE
  return QueryCudaDevices().count;
#else
  return 0;
#endif
}

absl::Status CheckRanksPerGpu(int workers, int visible, const std::string& backend) {
  if (workers <= visible || (backend != "nccl" && backend != "auto")) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "--device cuda: ", workers, " workers but ", visible,
      " GPU(s) visible: worker r uses GPU r mod ", visible, ", and NCCL (--backend ", backend,
      ") cannot put two ranks on one GPU; pass --backend "
      "host-staged to share GPUs, or use at most ",
      visible, " workers"));
}

absl::StatusOr<std::unique_ptr<Device>> CreateDevice(const DeviceOptions& options) {
  if (options.cpu_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu_threads must be >= 0, got ", options.cpu_threads));
  }
  if (options.kind == "cpu") return std::make_unique<CpuDevice>(options.cpu_threads);
  if (options.kind == "cuda") return CreateCuda(options, /*required=*/true);
  if (options.kind == "auto") return CreateCuda(options, /*required=*/false);
  return absl::InvalidArgumentError(
      absl::StrCat("--device must be cpu, cuda or auto, got \"", options.kind, "\""));
}

}  // namespace zeroshard
