// The Gloo backend: collectives on host memory over TCP (loopback or a pod
// network). Rendezvous runs through a zeroshard::Store with a key prefix, so
// one generation is one prefix (GlooStoreAdapter).
//
// Operations are asynchronous: each is queued to one background thread per
// communicator and runs in issue order (OpQueue); the returned Work completes
// when it ends. Buffers must stay alive until Wait returns OK, or, after an
// Abort, until the communicator is destroyed ([Note: completion wins once] in
// op_queue.h).
//
// Algorithms (buffers and the in-place rule as in communicator.h):
//   AllGather:     a pipelined ring built from Gloo primitives
//                  (gloo_ring_all_gather.h), so Abort always wakes it; any
//                  dtype (moved as bytes).
//   ReduceScatter: a ring built from Gloo primitives (unbound-buffer
//                  send/recv; gloo_ring_reduce_scatter.h), because the packaged
//                  Gloo has no usable one. fp32, bf16; sum, max.
//   AllReduce:     fp32, bf16: a ring reduce-scatter then a ring all-gather;
//                  int64, fp64 (control values): every rank's values
//                  all-gathered, then folded in rank order, so every rank
//                  gets the same bits (gloo_ring_all_reduce.h). Sum, max.
//   Broadcast:     a pipelined chain from the root (gloo_ring_broadcast.h),
//                  any dtype (bytes).
//   Barrier:       a one-byte ring all-gather, queued in order with the other
//                  ops; its opts.timeout bounds the wait for earlier ops too.
//                  A Barrier that returns DEADLINE_EXCEEDED may still run
//                  later: Abort the communicator rather than reuse it.
//   No op uses Gloo's own collectives: every wait is registered where Abort
//   wakes it (PendingWaits), which Gloo's own error path does not always do
//   (gloo_ring_broadcast.h). At world size 2 the rings run over two
//   contexts, one per direction (gloo_links.h); connecting then takes two
//   rendezvous, each bounded by GlooOptions::timeout.
// Memory: the reduce-scatter keeps fp32 scratch of 2 x count elements (3 for
// bf16) of the largest op so far, for the communicator's lifetime; the
// all-reduce keeps its own (for count / world_size elements) and, for counts
// not a multiple of world_size, a padded copy of its largest op (control
// values: world_size x count elements).
// bf16 reductions accumulate in fp32 and round once to bf16 at the end; their
// reduce-scatter moves fp32 on the wire (twice the bytes of the bf16 data),
// an all-reduce's gather phase bf16.
//
// Errors (Wait's status): a peer gone or a transport error: UNAVAILABLE; the
// op's CollectiveOptions::timeout passed: DEADLINE_EXCEEDED; after Abort:
// ABORTED; bad arguments: INVALID_ARGUMENT (without running). Gloo
// exceptions never escape. After any failure the communicator is unusable
// (it closes every connection): later ops fail with the first failure's status.
//
// Stats: per op, calls, bytes (nccl-tests sizes: all-gather and
// reduce-scatter count world_size*count elements, all-reduce and broadcast
// count elements, barrier 0) and issue-to-completion seconds, successes only.
//
// Process-wide effect: the first communicator sets SIGPIPE to ignored, so a
// peer that closed its socket is an error, not a killed worker.
//
// Thread safety: as Communicator (issue from one thread; Abort and stats()
// from any thread).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"
#include "worker/comm/store.h"

namespace zeroshard {

struct GlooOptions {
  std::string hostname = "127.0.0.1";          // Address to listen on and advertise.
  absl::Duration timeout = absl::Seconds(60);  // Rendezvous and connection timeout.
};

// Connects `world_size` ranks through `store` (keys under `prefix`); every rank
// calls this with the same prefix and world size. Blocks until all are
// connected. Errors: INVALID_ARGUMENT for a bad rank/world size;
// DEADLINE_EXCEEDED when a rank does not show up within opts.timeout;
// UNAVAILABLE for network failures.
absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooCommunicator(Store& store,
                                                                     const std::string& prefix,
                                                                     int rank, int world_size,
                                                                     const GlooOptions& opts = {});

}  // namespace zeroshard
