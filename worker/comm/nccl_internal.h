// Internals of the NCCL backend shared by its files: the state a
// communicator and its Work handles share, the Work handle's factory, and
// the bootstrap (nccl_bootstrap.cc). Included only by nccl_*.cc (it includes
// CUDA and NCCL headers; STYLE.md points 1, 2).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
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

// Polls a non-blocking communicator until its last call is no longer in
// progress; its final state as a Status (DEADLINE_EXCEEDED past `deadline`).
absl::Status WaitNotInProgress(ncclComm_t comm, absl::Time deadline, const char* what);

// What the communicator and its Work handles share.
struct NcclShared {
  int device = 0;
  int rank = 0;
  int world_size = 1;
  std::atomic<bool> aborted{false};
  absl::Mutex mu;  // Orders NCCL calls against ncclCommAbort.
  ncclComm_t comm ABSL_GUARDED_BY(mu) = nullptr;
  absl::Status failed ABSL_GUARDED_BY(mu);  // First failure; sticky.
  CommStats stats ABSL_GUARDED_BY(mu);

  void Fail(const absl::Status& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (failed.ok()) failed = s;
  }
};

// A Work that completes when `done` (recorded after the op on its stream)
// has fired; `start` brackets the op for its device time. CompleteOnStream
// makes `compute` wait for `done` ([Note: stream-ordered collectives]).
// Takes ownership of both events.
std::unique_ptr<Work> MakeNcclWork(std::shared_ptr<NcclShared> shared, cudaStream_t compute,
                                   cudaEvent_t start, cudaEvent_t done, CommOp op,
                                   int64_t bytes);

// Bootstrap (nccl_bootstrap.cc): rank 0 creates the ncclUniqueId and sets it
// under `key` in the store; the others wait for it (bounded by `timeout`).
// Then a non-blocking ncclCommInitRankConfig polled until the same deadline,
// on the current CUDA device. The communicator is aborted on any failure.
absl::StatusOr<ncclComm_t> InitNcclComm(Store& store, const std::string& key, int rank,
                                        int world_size, absl::Duration timeout);

}  // namespace zeroshard
