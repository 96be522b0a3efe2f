// A worker process's life: read the job from the coordinator, join, and for
// each generation that includes it build a communicator (rendezvous through
// the coordinator's store under the generation's prefix) and an engine over
// the generation's shard plan, restore the latest checkpoint if there is one
// (or the job asks to resume), and train until the job ends. When a
// generation ends under it (a peer left, failed or joined) it waits for the
// next one and starts again from the latest checkpoint (from the initial
// weights if the job keeps none). Every failure is reported to the
// coordinator, which ends the generation at once; failures a lost peer or an
// ended generation cause (UNAVAILABLE, ABORTED, DEADLINE_EXCEEDED, ...) lead
// to the next generation for as long as the job goes on: the coordinator
// counts failures against the job config's max_failures and fails the job
// past it. Any other error ends the worker.
//
// How a worker ends:
// - the job's last step is trained: Leave (job_completed), OK;
// - the job had completed before it joined (or while it waited): one line
//   saying so, OK;
// - SIGTERM/SIGINT (stop_signal.h): at the next step boundary, or at once
//   while waiting for a generation, Leave, OK; the others go on without it;
// - the job failed (restart budget spent): FAILED_PRECONDITION
//   "job <id> failed: <reason>";
// - its own error (bad config, unreachable coordinator, ...): that error.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/rpc/rpc_security.h"
#include "worker/trainer/stop_token.h"

namespace zeroshard {

struct WorkerOptions {
  std::string coordinator;         // HOST:PORT.
  ClientSecurity security;         // TLS files and token file for the coordinator (rpc_security.h).
  std::string worker_id;           // "" = "<hostname>:<pid>".
  std::string host = "127.0.0.1";  // Address peers reach this worker on (Gloo).
  int threads = 1;                 // Compute threads; 0 = the job's setting.
  // Override the job's offload settings when non-empty (common/offload_config.h).
  std::string offload_optimizer, offload_params, offload_dir;
  int offload_prefetch = -1;                        // --offload-prefetch; -1 = the job's.
  absl::Duration join_timeout = absl::Minutes(10);  // Waiting for a generation.
  // A Join refused because a live member holds this worker id (this
  // worker's previous run, e.g. a restarted pod, before its lease lapsed) is
  // retried this long; keep it above the coordinator's --lease-timeout.
  absl::Duration held_id_wait = absl::Seconds(60);
  // After a failed collective: how long to wait for the coordinator to end
  // the generation before giving up (covers a lease timeout).
  absl::Duration generation_end_timeout = absl::Seconds(60);
  // Set: hand off this worker's shard at the next step boundary and leave
  // (SIGTERM; stop_signal.h's SignalStopToken in the worker process), or
  // leave at once while joining or waiting for a generation. Default: never.
  StopToken stop;
  // Fault injection, for tests that run workers as threads: once set, the
  // worker vanishes as a killed process would, at the start of its next
  // step (or when its current wait ends). It sends nothing more (no Leave,
  // no failure report, no heartbeat), its connections close, and RunWorker
  // returns ABORTED. Default: never.
  StopToken crash;
};

// Returns OK when the job's steps are done, the job had completed already,
// or a stop was requested; UNAVAILABLE when the coordinator cannot be
// reached; FAILED_PRECONDITION when the job failed; the first unrecoverable
// error otherwise.
absl::Status RunWorker(const WorkerOptions& options);

}  // namespace zeroshard
