// The worker process's liveness and readiness, as its /healthz and /readyz
// (health_http.h) report them for Kubernetes probes.
//
// - Healthy: the process is alive and, once it has joined a job, a
//   heartbeat to the coordinator has succeeded within `max_age`. Before the
//   first join it is healthy: joining has its own deadline (the worker exits
//   1 when no coordinator answers), so liveness does not race it.
// - Ready: the latest heartbeat reply said this worker is a member of a
//   running generation (it trains). Joiners waiting to be admitted, and a
//   worker between generations, are alive but not ready.
//
// WorkerSession (worker/trainer/worker_session.h) records every Join and
// heartbeat outcome into the process-wide instance.
//
// Thread safety: every method may be called from any thread (atomics only).
#pragma once

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace zeroshard {

class WorkerHealth {
 public:
  // The instance WorkerSession records into and the health server reads.
  static WorkerHealth& Process();

  // A Join or heartbeat reply arrived at `now`; `in_running_generation`:
  // the reply says this member belongs to a running generation.
  void RecordContact(absl::Time now, bool in_running_generation);
  // A heartbeat failed (coordinator unreachable, lease lost): not ready.
  // The time of the last success is kept, so liveness fails only once
  // failures have lasted `max_age`.
  void RecordFailedContact();
  // The session ended (left, or about to re-join): not a member.
  void RecordSessionEnded();

  bool Healthy(absl::Time now, absl::Duration max_age) const;
  bool Ready() const;

 private:
  static constexpr int64_t kNever = INT64_MIN;
  std::atomic<int64_t> last_contact_ns_{kNever};  // absl::ToUnixNanos of the last success.
  std::atomic<bool> ready_{false};
};

}  // namespace zeroshard
