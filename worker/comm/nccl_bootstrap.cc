// Bootstrap of the NCCL backend: the unique id through the store, the
// non-blocking communicator initialisation, the device count.
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "worker/comm/nccl_communicator.h"
#include "worker/comm/nccl_internal.h"

namespace zeroshard {
namespace {

absl::StatusOr<ncclUniqueId> ExchangeUniqueId(Store& store, const std::string& key, int rank,
                                              absl::Duration timeout) {
  ncclUniqueId id;
  if (rank == 0) {
    ZS_GPU_RETURN_IF_ERROR(ncclGetUniqueId(&id));
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&id);
    ZS_RETURN_IF_ERROR(store.Set(key, std::vector<uint8_t>(p, p + sizeof(id))));
    return id;
  }
  ZS_RETURN_IF_ERROR(store.Wait({key}, timeout));
  ZS_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, store.Get(key));
  if (bytes.size() != sizeof(id)) {
    return absl::DataLossError(absl::StrCat("store key ", key, " holds ", bytes.size(),
                                            " bytes, an ncclUniqueId has ", sizeof(id)));
  }
  std::memcpy(&id, bytes.data(), sizeof(id));
  return id;
}

}  // namespace

absl::StatusOr<ncclComm_t> InitNcclComm(Store& store, const std::string& key, int rank,
                                        int world_size, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  ZS_ASSIGN_OR_RETURN(ncclUniqueId id, ExchangeUniqueId(store, key, rank, timeout));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // Initialisation polled against the deadline below.
  ncclComm_t comm = nullptr;
  absl::Status init = GpuStatus(ncclCommInitRankConfig(&comm, world_size, id, rank, &config),
                                "ncclCommInitRankConfig", __FILE__, __LINE__);
  if (init.ok()) init = WaitNotInProgress(comm, deadline, "ncclCommInitRankConfig");
  if (!init.ok()) {
    if (comm != nullptr) ncclCommAbort(comm);
    return init;
  }
  return comm;
}


absl::StatusOr<int> CudaDeviceCount() {
  int n = 0;
  absl::Status s = GpuStatus(cudaGetDeviceCount(&n), "cudaGetDeviceCount", __FILE__, __LINE__);
  if (!s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("no usable CUDA device: ", s.message()));
  }
  if (n == 0) return absl::FailedPreconditionError("no CUDA device visible");
  return n;
}

}  // namespace zeroshard
