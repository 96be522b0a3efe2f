// A worker joining its job, and what a job that has ended means to it.
// Thread safety: none needed (the worker's main thread).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/model/model_config.h"
#include "common/rpc/coordinator_client.h"
#include "worker/trainer/worker_session.h"

namespace zeroshard {

// A job that has ended, as seen by a worker that has nothing to do in it:
// OK (with one line) if it completed, its failure otherwise.
absl::Status EndedJobOutcome(const v1::JobStatus& status);

// Completed or failed.
bool JobEnded(const v1::JobStatus& status);

// Joins the job. A null session with OK when there is nothing to do: the
// job completed meanwhile, or `stop` (SIGTERM) came while joining; the
// job's failure if it failed; else the Join's error.
absl::StatusOr<std::unique_ptr<WorkerSession>> JoinJob(CoordinatorClient& client,
                                                       const WorkerSession::Identity& identity,
                                                       const ModelConfig& model,
                                                       absl::Duration held_id_wait, StopToken stop);

}  // namespace zeroshard
