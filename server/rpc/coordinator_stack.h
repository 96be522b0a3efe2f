// The coordinator as a process runs it: the Coordinator service plus, when
// options.checkpoint_dir is set, the checkpoint service on the same port
// (checkpoint.proto). Used by zeroshard-coordinator and by `zeroshard
// launch`'s embedded coordinator, so both serve the same thing.
// Thread-safe as CoordinatorServer.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "server/checkpoint/checkpoint_host.h"
#include "server/checkpoint/checkpoint_metrics.h"
#include "server/checkpoint/local_read_server.h"
#include "server/rpc/coordinator_server.h"

namespace zeroshard {

struct CoordinatorStack {
  // Open streams per caller, shared by both services (declared first: it
  // outlives them).
  std::unique_ptr<StreamLimits> streams;
  // Declared first so it outlives the server that serves it.
  std::unique_ptr<server::CheckpointHost> checkpoints;  // Null without a checkpoint dir.
  // The checkpoint metrics, over the server's registry; observed by the
  // store, so declared before the server (whose RPCs call it) and after the
  // store.
  std::unique_ptr<server::CheckpointMetrics> checkpoint_metrics;
  std::unique_ptr<CoordinatorServer> server;
  // Local reads of the store's checkpoints; null without a checkpoint dir,
  // with options.local_reads off, or when it failed (a warning says why).
  // Declared last, so it stops first: its requests use the server's auth
  // gate and core (the job) and the store.
  std::unique_ptr<server::LocalReadServer> local_reads;
};

// Errors: the checkpoint store's (prefixed "--checkpoint-dir: ") or
// CoordinatorServer::Start's.
absl::StatusOr<CoordinatorStack> StartCoordinatorStack(const CoordinatorOptions& options,
                                                       int keep_checkpoints);

}  // namespace zeroshard
