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

absl::StatusOr<NcclComms> InitNcclComms(Store& store, const std::string& key, int rank,
                                        int world_size, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  ZS_ASSIGN_OR_RETURN(ncclUniqueId id, ExchangeUniqueId(store, key, rank, timeout));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // Initialisation polled against the deadline below.
  NcclComms comms;
  ncclComm_t& gather = comms.lanes[static_cast<int>(NcclLane::kGather)];
  ncclComm_t& reduce = comms.lanes[static_cast<int>(NcclLane::kReduce)];
  absl::Status s = GpuStatus(ncclCommInitRankConfig(&gather, world_size, id, rank, &config),
                             "ncclCommInitRankConfig", __FILE__, __LINE__);
  if (s.ok()) s = WaitNotInProgress(gather, deadline, "ncclCommInitRankConfig");
  if (s.ok()) {
    // Every rank in one colour, ordered by rank: the same group, a second
    // communicator (its own order of operations).
    ncclConfig_t split = NCCL_CONFIG_INITIALIZER;
    split.blocking = 0;
    s = GpuStatus(ncclCommSplit(gather, 0, rank, &reduce, &split), "ncclCommSplit", __FILE__,
                  __LINE__);
    if (s.ok()) s = WaitNotInProgress(gather, deadline, "ncclCommSplit");
    if (s.ok() && reduce != nullptr) s = WaitNotInProgress(reduce, deadline, "ncclCommSplit");
    if (s.ok() && reduce == nullptr) s = absl::InternalError("ncclCommSplit gave no communicator");
  }
  if (!s.ok()) {
    for (ncclComm_t c : comms.lanes) {
      if (c != nullptr) ncclCommAbort(c);
    }
    return s;
  }
  return comms;
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
