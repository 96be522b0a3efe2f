// The NCCL backend: collectives on CUDA device memory. This header includes no
// CUDA or NCCL header; only nccl_*.cc files do (STYLE.md points 1, 2).
//
// Bootstrap: rank 0 creates the ncclUniqueId and sets "<prefix>nccl_id" in the
// Store; the others Wait (bounded by NcclOptions::timeout) and Get it. One
// backend instance per generation: a new generation uses a new prefix.
// Initialisation is non-blocking NCCL (config.blocking = 0) polled against
// the deadline, so a rank that never shows up gives DEADLINE_EXCEEDED.
//
// Lanes, streams and ordering (STYLE.md point 11; FSDP2's FSDPCommContext):
// NCCL runs one communicator's operations in issue order whatever their
// streams, so the backend holds two communicators (the second split from the
// first), one per direction, each with its own stream: all-gather on the
// gather lane; reduce-scatter, all-reduce, broadcast and barrier on the
// reduce lane. A prefetching all-gather then overlaps a reduce-scatter. Each
// op first makes its stream wait (cudaStreamWaitEvent, no host sync) on an
// event recorded on the compute stream at issue time, so it reads what the
// compute stream wrote before the call. Work::Wait polls a completion event
// until its timeout and checks its communicator's asynchronous error
// meanwhile. A grouped collective (AllGatherGroup, ReduceScatterGroup) is
// one ncclGroupStart/ncclGroupEnd: one launch, one Work, one call in stats().
//
// Buffers are device pointers on this rank's device (INVALID_ARGUMENT
// otherwise). Reductions: fp32, bf16, fp16; sum, max. NCCL reduces bf16 with
// a rounding at every ring step (unlike the Gloo backend, which rounds once),
// so the engine reduces gradients in fp32 where that matters.
//
// Errors: CUDA and NCCL return codes become absl::Status (nccl_check.h) with a
// file:line breadcrumb. After Abort (ncclCommAbort of both lanes) pending and
// later ops fail with ABORTED; Abort waits for at most one NCCL call, never
// for an op in flight (an issue holds the lock for its calls, not its
// wait). A failed NCCL call or an asynchronous NCCL error makes later ops
// fail too (the communicator is unusable, as NCCL specifies).
//
// Stats: as the Gloo backend; seconds are device time between events around
// the op (recorded when Wait first sees it complete).
//
// Thread safety: issue from one thread; Abort and stats() from any thread.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"
#include "worker/comm/store.h"

namespace zeroshard {

struct NcclOptions {
  int device = -1;                             // CUDA ordinal; -1 = rank % device count.
  absl::Duration timeout = absl::Seconds(60);  // Bootstrap and initialisation deadline.
  // The stream the caller computes on (a cudaStream_t); ops wait for work
  // issued on it before the call. nullptr = the legacy default stream.
  void* compute_stream = nullptr;
};

// Number of CUDA devices; FAILED_PRECONDITION naming the CUDA error when there
// is no usable device or driver.
absl::StatusOr<int> CudaDeviceCount();

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(Store& store,
                                                                     const std::string& prefix,
                                                                     int rank, int world_size,
                                                                     const NcclOptions& opts = {});

}  // namespace zeroshard
