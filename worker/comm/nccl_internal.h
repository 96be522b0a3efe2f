// Internals of the NCCL backend shared by its files: the state a
// communicator and its Work handles share, the Work handle's factory, and
// the bootstrap (nccl_bootstrap.cc). Included only by nccl_*.cc (it includes
// CUDA and NCCL headers; STYLE.md points 1, 2).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"
#include "worker/comm/nccl_check.h"
#include "worker/comm/store.h"

namespace zeroshard {

// NCCL's type for a DType; INVALID_ARGUMENT for one NCCL has not.
absl::StatusOr<ncclDataType_t> NcclType(DType d);
inline ncclRedOp_t NcclOp(ReduceOp op) { return op == ReduceOp::kSum ? ncclSum : ncclMax; }

// The backend's two communicators, one per direction ("lane"): NCCL runs
// one communicator's operations in issue order, whatever their streams, so
// a prefetching all-gather could not overlap a reduce-scatter on one
// communicator. FSDP2 keeps a process group per direction for the same
// reason. The reduce lane carries reduce-scatter, all-reduce, broadcast and
// barrier; the second communicator is split from the first (ncclCommSplit).
enum class NcclLane { kGather = 0, kReduce = 1 };
inline constexpr int kNcclLanes = 2;

// Polls `state` (one ncclCommGetAsyncError reading) with a growing pause
// (20 us to 1 ms) until it is no longer ncclInProgress; the final state as a
// Status, or `state`'s own error, or DEADLINE_EXCEEDED past `deadline`.
absl::Status PollNotInProgress(absl::Time deadline, const char* what,
                               absl::FunctionRef<absl::StatusOr<ncclResult_t>()> state);
// PollNotInProgress of a communicator no other thread can reach yet.
absl::Status WaitNotInProgress(ncclComm_t comm, absl::Time deadline, const char* what);

// What the communicator and its Work handles share.
struct NcclShared {
  int device = 0;
  int rank = 0;
  int world_size = 1;
  std::atomic<bool> aborted{false};
  // Orders NCCL calls against ncclCommAbort (NCCL: one thread at a time on a
  // communicator). Held for single calls, never across a wait, so Abort
  // waits for at most one call, not for an op's timeout.
  absl::Mutex mu;
  ncclComm_t comms[kNcclLanes] ABSL_GUARDED_BY(mu) = {nullptr, nullptr};
  absl::Status failed ABSL_GUARDED_BY(mu);  // First failure; sticky.
  CommStats stats ABSL_GUARDED_BY(mu);

  ncclComm_t comm(NcclLane lane) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return comms[static_cast<int>(lane)];
  }
  void Fail(const absl::Status& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (failed.ok()) failed = s;
  }
  // ncclCommAbort on every lane; later and pending ops fail with ABORTED.
  void AbortLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Until `lane`'s last call is no longer in progress, taking mu for each
  // poll only: ABORTED as soon as the communicator is aborted.
  absl::Status WaitLane(NcclLane lane, absl::Time deadline, const char* what);
};

// A Work that completes when `done` (recorded after the op on its lane's
// stream) has fired; `start` brackets the op for its device time.
// CompleteOnStream makes `compute` wait for `done` ([Note: stream-ordered
// collectives]). Takes ownership of both events.
std::unique_ptr<Work> MakeNcclWork(std::shared_ptr<NcclShared> shared, NcclLane lane,
                                   cudaStream_t compute, cudaEvent_t start, cudaEvent_t done,
                                   CommOp op, int64_t bytes);

// Bootstrap (nccl_bootstrap.cc): rank 0 creates the ncclUniqueId and sets it
// under `key` in the store; the others wait for it (bounded by `timeout`).
// Then a non-blocking ncclCommInitRankConfig for the gather lane and an
// ncclCommSplit for the reduce lane, each polled until the same deadline,
// on the current CUDA device. Both are aborted on any failure.
struct NcclComms {
  ncclComm_t lanes[kNcclLanes] = {nullptr, nullptr};
};
absl::StatusOr<NcclComms> InitNcclComms(Store& store, const std::string& key, int rank,
                                        int world_size, absl::Duration timeout);

}  // namespace zeroshard
