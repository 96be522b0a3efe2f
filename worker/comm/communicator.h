// The one collective interface the engine sees (STYLE.md points 1, 8, 9, 11).
// Backends: Gloo (CPU, TCP; worker/comm/gloo_*) and NCCL (CUDA;
// worker/comm/nccl_*, built only where nvcc exists). Engine code never
// includes a backend header.
//
// Signatures follow NCCL (nccl.h): send buffer, receive buffer, per-rank
// element count, dtype. Buffers are host memory for Gloo and device memory for
// NCCL.
//   AllGather:     recv[r*count .. (r+1)*count) = rank r's send[0..count).
//                  In place when send == recv + rank*count.
//   ReduceScatter: recv[0..count) = sum over ranks of send[rank*count ..).
//                  In place when recv == send + rank*count.
//   AllReduce:     recv[0..count) = op over ranks of send; in place when equal.
//   Broadcast:     recv = root's send; in place when equal.
// Every operation is asynchronous where the backend allows: it returns a Work
// handle; the buffers must stay alive and untouched until Wait returns OK.
// Operations on one communicator complete in issue order.
//
// Errors: a peer that vanished or a timeout gives UNAVAILABLE or
// DEADLINE_EXCEEDED from Wait; after Abort every pending and later operation
// fails with ABORTED. A communicator belongs to exactly one generation.
//
// Thread safety: issue operations from one thread; Abort and stats() may be
// called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/dtype.h"

namespace zeroshard {

enum class ReduceOp { kSum, kMax };

enum class CommOp {
  kAllGather = 0,
  kReduceScatter,
  kAllReduce,
  kBroadcast,
  kBarrier,
  kRingShift,
  kCount
};
// Metric label of an op: "all_gather", "reduce_scatter", ...
const char* CommOpName(CommOp op);
// `status` with the op's name first ("all_gather: communicator aborted"),
// unless it starts with it already or op is kCount; OK stays OK. A failure
// report then says what the rank was in.
absl::Status NameOp(CommOp op, const absl::Status& status);

// Cumulative figures for one op since the communicator was created.
struct CommOpStats {
  int64_t calls = 0;
  // Bytes per rank in nccl-tests' algbw size: the full (world_size * count)
  // buffer for all-gather and reduce-scatter, count elements for all-reduce
  // and broadcast, 0 for barrier.
  int64_t bytes = 0;
  double seconds = 0.0;  // Issue-to-completion wall time, summed.
};

struct CommStats {
  CommOpStats ops[static_cast<int>(CommOp::kCount)];
  const CommOpStats& of(CommOp op) const { return ops[static_cast<int>(op)]; }
};

// Bus bandwidth factor for an op at world size n, as nccl-tests
// doc/PERFORMANCE.md: (n-1)/n for all-gather and reduce-scatter, 2(n-1)/n for
// all-reduce, 1 for broadcast.
double BusBandwidthFactor(CommOp op, int world_size);

// [Note: stream-ordered collectives] On a device with a stream (CUDA) a
// collective can complete on the stream instead of on the host:
// CompleteOnStream makes device work issued afterwards on the stream of
// CommunicatorOptions::device wait for the op (an event wait on the device,
// cudaStreamWaitEvent), so the host issues the next kernels at once. Memory
// freed on that stream afterwards is stream-ordered too, so it is not reused
// before the op is done. Such a Work is still Waited later, where the host
// must read a value or hand the state over (the engine does it before it
// reads the squared norm); that Wait is where its error and its timeout
// surface. Backends whose ops complete on the host (Gloo, host-staged)
// answer UNIMPLEMENTED and the caller Waits before touching the buffers.
class Work {
 public:
  virtual ~Work() = default;
  // Waits for completion; DEADLINE_EXCEEDED if not done within timeout.
  virtual absl::Status Wait(absl::Duration timeout) = 0;
  // See the note above. OK: ordered on the device stream; UNIMPLEMENTED: the
  // backend cannot (Wait instead); another error: the op failed to issue.
  // Not thread-safe with Wait.
  virtual absl::Status CompleteOnStream() {
    return absl::UnimplementedError("this backend completes collectives on the host");
  }
  // The operation, for error messages; kCount where unknown.
  virtual CommOp op() const { return CommOp::kCount; }
};

struct CollectiveOptions {
  absl::Duration timeout = absl::Seconds(60);
};

// One member of a grouped collective: the buffers and per-rank count one
// AllGather or ReduceScatter call would take, with that call's in-place rule.
struct CollectiveArgs {
  const void* send = nullptr;
  void* recv = nullptr;
  int64_t count = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  virtual std::unique_ptr<Work> AllGather(const void* send, void* recv, int64_t count, DType dtype,
                                          const CollectiveOptions& opts = {}) = 0;
  virtual std::unique_ptr<Work> ReduceScatter(const void* send, void* recv, int64_t count,
                                              DType dtype, ReduceOp op,
                                              const CollectiveOptions& opts = {}) = 0;
  virtual std::unique_ptr<Work> AllReduce(const void* send, void* recv, int64_t count, DType dtype,
                                          ReduceOp op, const CollectiveOptions& opts = {}) = 0;
  virtual std::unique_ptr<Work> Broadcast(const void* send, void* recv, int64_t count, DType dtype,
                                          int root, const CollectiveOptions& opts = {}) = 0;
  // Ring shift: rank r sends `send[0..count)` to rank (r - 1) mod N and
  // receives rank (r + 1) mod N's into `recv[0..count)` (its right
  // neighbour's); equal counts on every rank; send and recv must not
  // overlap. Peer redundancy's neighbour copy travels this way. Backends
  // without it (NCCL, host-staged: control values only go over Gloo)
  // answer UNIMPLEMENTED.
  virtual std::unique_ptr<Work> RingShift(const void* send, void* recv, int64_t count, DType dtype,
                                          const CollectiveOptions& opts = {});
  // Grouped collectives, as NCCL's ncclGroupStart/ncclGroupEnd: the result
  // of one AllGather (ReduceScatter) per member of `group`, in order, all of
  // `dtype`, completed by one Work. The shm and Gloo backends run a group as
  // one op of their queue (shm packs the members into shared rounds, one
  // meeting of the ranks for many small units) and count it in stats() as
  // one call of the summed bytes; the default here (NCCL, host-staged)
  // issues the members one by one, each counted, and waits for all. Every
  // rank passes the same counts in the same order; members must not overlap
  // each other. Errors: as the single op's (the first failing member's); an
  // empty group is INVALID_ARGUMENT.
  virtual std::unique_ptr<Work> AllGatherGroup(absl::Span<const CollectiveArgs> group, DType dtype,
                                               const CollectiveOptions& opts = {});
  virtual std::unique_ptr<Work> ReduceScatterGroup(absl::Span<const CollectiveArgs> group,
                                                   DType dtype, ReduceOp op,
                                                   const CollectiveOptions& opts = {});
  virtual absl::Status Barrier(const CollectiveOptions& opts = {}) = 0;
  // Ends the communicator (its generation ended): pending work fails fast.
  virtual void Abort() = 0;
  virtual CommStats stats() const = 0;
};

}  // namespace zeroshard
