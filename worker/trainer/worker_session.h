// One worker's membership in a job: it joins the coordinator, renews its lease
// from a background heartbeat thread, waits for a generation that includes it,
// and notices when that generation ends (a peer left, failed or joined).
//
// Thread safety: all methods may be called from any thread; the
// generation-end callback runs on the heartbeat thread.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/rpc/coordinator_client.h"
#include "common/rpc/heartbeat_stream_client.h"
#include "common/shard_plan.h"
#include "worker/trainer/stop_token.h"

namespace zeroshard {

class WorkerSession {
 public:
  struct Identity {
    std::string job_id;     // "" = the coordinator's job.
    std::string worker_id;  // Stable name, e.g. "host:pid".
    std::string host;
  };

  // Reads the job (id and config) from the coordinator, retrying while it is
  // unreachable; UNAVAILABLE with the last error after `timeout`; CANCELLED
  // once `stop` is set.
  static absl::StatusOr<v1::JobStatus> ProbeJob(CoordinatorClient& client, absl::Duration timeout,
                                                StopToken stop = {});

  // Joins with the model's units and starts heartbeats. A Join refused
  // because a live member holds the worker id (this worker's previous run,
  // e.g. a restarted pod, whose lease has not lapsed yet) is retried for up
  // to `held_id_wait` (CoordinatorClient::JoinRetryingHeldId; CANCELLED once
  // `stop` is set). Other errors: the Join's, at once. The session keeps
  // `stop` for AwaitGeneration.
  static absl::StatusOr<std::unique_ptr<WorkerSession>> Join(
      CoordinatorClient& client, const Identity& identity, const std::vector<UnitSpec>& units,
      absl::Duration held_id_wait = absl::ZeroDuration(), StopToken stop = {});
  ~WorkerSession();  // Stops the heartbeat thread (does not Leave).

  // Blocks until a running generation includes this member, or the job has
  // completed (the info's job_state is JOB_STATE_COMPLETED: nothing left to
  // train). FAILED_PRECONDITION "job ... failed: <reason>" when the job has
  // failed; CANCELLED "leave requested" once the stop token given to Join
  // is set; DEADLINE_EXCEEDED after `timeout`; NOT_FOUND if the
  // lease expired (Join again).
  absl::StatusOr<v1::GenerationInfo> AwaitGeneration(absl::Duration timeout);

  // `on_end` runs (once, on the heartbeat thread) when the heartbeat sees
  // that `generation` has ended, until StopWatching.
  void WatchForEnd(uint64_t generation, std::function<void()> on_end);
  // Drops the callback; when it returns, the callback is not running and will
  // not run (so what it captured may be destroyed).
  void StopWatching();
  bool Ended(uint64_t generation) const;
  // Waits up to `timeout` for Ended(generation); returns whether it ended.
  bool AwaitEnd(uint64_t generation, absl::Duration timeout) const;
  // Waits up to `timeout` for a heartbeat to say the coordinator no longer
  // knows this member (NOT_FOUND: its lease lapsed, or a restarted
  // coordinator never knew it); returns whether one did.
  bool AwaitForgotten(absl::Duration timeout) const ABSL_LOCKS_EXCLUDED(mu_);
  absl::Duration heartbeat_interval() const { return interval_; }

  void ReportFailure(uint64_t generation, int failed_rank, const std::string& reason);
  // The ranks of `generation` stopped at a step boundary and handed their
  // state over: ends it as a handoff, not a failure; `leaving_ranks` gave
  // theirs away to leave, so the next generation forms without them.
  // Best effort.
  void ReportHandoff(uint64_t generation, int64_t step, const std::vector<int>& leaving_ranks);
  // The last heartbeat reply said a member waits to be admitted: the
  // running generation should stop at its next step boundary.
  bool ChangePending() const;
  // A heartbeat reply said an operator stopped the job (StopJob): the
  // ranks save at their next step boundary and complete the job there.
  // Stays true once seen. (Not the stop token: that is this worker's own
  // SIGTERM.)
  bool JobStopped() const;
  // Best effort (the lease covers a lost Leave). `job_completed`: this
  // worker trained the job's last step.
  void Leave(bool job_completed = false);

  uint64_t member_id() const { return member_id_; }
  const std::string& job_id() const { return identity_.job_id; }
  CoordinatorClient& client() { return client_; }

 private:
  WorkerSession(CoordinatorClient& client, Identity identity, const v1::JoinResponse& joined,
                StopToken stop);
  void HeartbeatLoop();
  bool EndedLocked(uint64_t generation) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  CoordinatorClient& client_;
  // The heartbeat loop's stream (used only on heartbeat_'s thread).
  HeartbeatStreamClient beats_;
  Identity identity_;
  uint64_t member_id_;
  absl::Duration interval_;
  StopToken stop_token_;
  absl::Mutex callback_mu_;  // Held while on_end_ runs; taken before mu_.
  mutable absl::Mutex mu_;
  uint64_t latest_generation_ ABSL_GUARDED_BY(mu_) = 0;
  bool in_latest_ ABSL_GUARDED_BY(mu_) = false;
  bool change_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;
  bool lost_ ABSL_GUARDED_BY(mu_) = false;  // NOT_FOUND from a heartbeat: lease expired.
  uint64_t watched_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void()> on_end_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread heartbeat_;
};

}  // namespace zeroshard
