#include "worker/comm/communicator_factory.h"

#include "absl/strings/str_cat.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/host_staged_communicator.h"
#include "worker/comm/shm_communicator.h"
#include "worker/device/device.h"
#ifdef ZEROSHARD_HAVE_NCCL
#include "worker/comm/nccl_communicator.h"
#endif

namespace zeroshard {

absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(
    const std::string& backend, Store& store, const std::string& prefix, int rank, int world_size,
    const CommunicatorOptions& options) {
  if (backend == "gloo" || backend == "host-staged") {
    if (backend == "host-staged" && options.device == nullptr) {
      return absl::InvalidArgumentError(
          "backend \"host-staged\" needs CommunicatorOptions::device (the buffers' device)");
    }
    GlooOptions gloo;
    gloo.hostname = options.hostname;
    gloo.timeout = options.timeout;
    absl::StatusOr<std::unique_ptr<Communicator>> host =
        CreateGlooCommunicator(store, prefix, rank, world_size, gloo);
    if (!host.ok() || backend == "gloo") return host;
    return CreateHostStagedCommunicator(std::move(host).value(), options.device);
  }
  if (backend == "shm") {
    ShmOptions shm;
    shm.timeout = options.timeout;
    return CreateShmCommunicator(store, prefix, rank, world_size, shm);
  }
  if (backend == "nccl") {
#ifdef ZEROSHARD_HAVE_NCCL
    NcclOptions nccl;
    nccl.device = options.cuda_device;
    nccl.timeout = options.timeout;
    if (options.device != nullptr) {  // Ordered after the work on its stream.
      if (options.device->ordinal() >= 0) nccl.device = options.device->ordinal();
      nccl.compute_stream = options.device->stream();
    }
    return CreateNcclCommunicator(store, prefix, rank, world_size, nccl);
#else
    return absl::FailedPreconditionError(
        "backend \"nccl\" is not available: this build has no NCCL (configure with CUDA and "
        "NCCL installed, ZEROSHARD_CUDA=ON)");
#endif
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "backend must be \"gloo\", \"shm\", \"nccl\" or \"host-staged\", got \"", backend, "\""));
}

}  // namespace zeroshard
