#include "worker/comm/communicator_factory.h"

#include "absl/strings/str_cat.h"
#include "worker/comm/gloo_communicator.h"
#ifdef ZEROSHARD_HAVE_NCCL
#include "worker/comm/nccl_communicator.h"
#endif

namespace zeroshard {

absl::StatusOr<std::unique_ptr<Communicator>> CreateCommunicator(
    const std::string& backend, Store& store, const std::string& prefix, int rank, int world_size,
    const CommunicatorOptions& options) {
  if (backend == "gloo") {
    GlooOptions gloo;
    gloo.hostname = options.hostname;
    gloo.timeout = options.timeout;
    return CreateGlooCommunicator(store, prefix, rank, world_size, gloo);
  }
  if (backend == "nccl") {
#ifdef ZEROSHARD_HAVE_NCCL
    NcclOptions nccl;
    nccl.device = options.cuda_device;
    nccl.timeout = options.timeout;
    return CreateNcclCommunicator(store, prefix, rank, world_size, nccl);
#else
    return absl::FailedPreconditionError(
        "backend \"nccl\" is not available: this build has no NCCL (configure with CUDA and "
        "NCCL installed, ZEROSHARD_CUDA=ON)");
#endif
  }
  return absl::InvalidArgumentError(
      absl::StrCat("backend must be \"gloo\" or \"nccl\", got \"", backend, "\""));
}

}  // namespace zeroshard
