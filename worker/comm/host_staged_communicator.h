// The host-staged backend: collectives on the memory of a Device (device
// pointers on CUDA, host memory on the CPU device) run by an inner host
// communicator (Gloo) on pinned host copies. For when NCCL cannot run: several
// ranks sharing one GPU (NCCL refuses them), small machines, tests.
//
// How it works. Every op runs on one background thread (OpQueue), in issue
// order, so the caller's compute overlaps it:
//   1. copy the input from the device into pinned host staging memory
//      (Device::Copy) and wait for that copy (RecordEvent + Wait);
//   2. run the inner collective in place on the staging buffer and wait;
//   3. copy the result back into the device buffer and wait for that copy.
// The Work completes after step 3, so when Wait returns OK the result is in
// the device buffer and nothing of the op is left on the device's stream.
// Staging layout per op (one buffer, the inner op always in place):
//   AllGather      world*count elements; input at rank*count, result all.
//   ReduceScatter  world*count elements; input all, result at rank*count.
//   AllReduce, Broadcast  count elements; input and result the same.
// On CUDA, step 1 is enqueued when the queue reaches the op, so it lands on
// the stream behind whatever the caller enqueued meanwhile: correct (the
// contract keeps send untouched until Wait) but it can start later than NCCL.
//
// [Note: staged device calls] Steps 1 and 3 call the device's Copy and
// RecordEvent (and AllocatePinnedHost) from the queue thread while the owner
// keeps using the device. device.h asks for one thread at a time; this relies
// on those calls holding no state but the stream on CpuDevice (memcpy) and
// CudaDevice (cudaSetDevice is per thread, cudaMemcpyAsync/cudaEventRecord
// are thread-safe). A Device with other per-call state must not be staged.
//
// Memory: one pinned staging buffer of the largest op so far (reused, grown
// by reallocation), touched only by the queue thread. After a failed step it
// may still be written by the inner op or the device's copy, so it is handed
// to KeepForever ([Note: failed collective buffers] in wait_or_abort.h) and
// never freed.
//
// Timeouts: one deadline per op, CollectiveOptions::timeout from when the
// queue starts it, bounds all three steps; the inner op gets what is left.
//
// Errors (Wait's status): as the inner communicator's (DEADLINE_EXCEEDED,
// UNAVAILABLE, ...) or the device's; INVALID_ARGUMENT for bad arguments
// (without running). Any failure aborts the inner communicator and breaks
// this one: ops already queued fail with the first failure's status, later
// ones with ABORTED. After Abort() every pending and later op fails ABORTED.
//
// Stats: this communicator's own, with communicator.h's meaning; seconds run
// from issue to the end of step 3.
//
// Thread safety: as Communicator (issue from one thread; Abort and stats()
// from any thread).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "worker/comm/communicator.h"
#include "worker/device/device.h"

namespace zeroshard {

// Wraps `host`, a communicator on host memory (Gloo), for buffers of
// `device`, which must outlive the result. INVALID_ARGUMENT for a null
// `host` or `device`.
absl::StatusOr<std::unique_ptr<Communicator>> CreateHostStagedCommunicator(
    std::unique_ptr<Communicator> host, Device* device);

}  // namespace zeroshard
