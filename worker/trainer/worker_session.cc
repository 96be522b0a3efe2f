#include "worker/trainer/worker_session.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/infra/host_name.h"
#include "common/rpc/plan_proto.h"
#include "worker/health/worker_health.h"

namespace zeroshard {

absl::StatusOr<v1::JobStatus> WorkerSession::ProbeJob(CoordinatorClient& client,
                                                      absl::Duration timeout, StopToken stop) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::Status last;
  while (absl::Now() < deadline && !stop.stop_requested()) {
    auto status = client.GetJobStatus(v1::GetJobStatusRequest());
    if (status.ok()) return status;
    last = status.status();
    if (last.code() != absl::StatusCode::kUnavailable) return last;
    absl::SleepFor(absl::Milliseconds(200));
  }
  if (stop.stop_requested()) return absl::CancelledError("leave requested");
  return absl::UnavailableError(last.ok() ? "timed out" : std::string(last.message()));
}

absl::StatusOr<std::unique_ptr<WorkerSession>> WorkerSession::Join(
    CoordinatorClient& client, const Identity& identity, const std::vector<UnitSpec>& units,
    absl::Duration held_id_wait, StopToken stop) {
  v1::JoinRequest request;
  request.set_job_id(identity.job_id);
  request.set_worker_id(identity.worker_id);
  request.set_host(identity.host);
  // For zeroshard_rank_info: the machine, and the pod under Kubernetes
  // (POD_NAME from the Downward API). Labels only: a value the coordinator
  // would refuse (not printable ASCII, over 255 bytes) is left out rather
  // than costing the Join.
  auto label = [](const char* v) {
    const std::string s = v == nullptr ? "" : v;
    if (s.size() > 255) return std::string();
    for (char c : s) {
      if (c <= 0x20 || c >= 0x7f) return std::string();
    }
    return s;
  };
  request.set_hostname(label(HostName().c_str()));
  request.set_pod(label(std::getenv("POD_NAME")));
  UnitSpecsToProto(units, request.mutable_units());
  auto joined =
      client.JoinRetryingHeldId(request, held_id_wait, [stop] { return stop.stop_requested(); });
  if (!joined.ok()) return joined.status();
  return std::unique_ptr<WorkerSession>(new WorkerSession(client, identity, *joined, stop));
}

WorkerSession::WorkerSession(CoordinatorClient& client, Identity identity,
                             const v1::JoinResponse& joined, StopToken stop)
    : client_(client),
      beats_(&client),
      identity_(std::move(identity)),
      member_id_(joined.member_id()),
      interval_(absl::Milliseconds(std::max<int64_t>(50, joined.heartbeat_interval_ms()))),
      stop_token_(stop) {
  WorkerHealth::Process().RecordContact(absl::Now(), /*in_running_generation=*/false);
  heartbeat_ = std::thread([this] { HeartbeatLoop(); });
}

WorkerSession::~WorkerSession() {
  stop_.Notify();
  if (heartbeat_.joinable()) heartbeat_.join();
  WorkerHealth::Process().RecordSessionEnded();
}

void WorkerSession::HeartbeatLoop() {
  while (!stop_.WaitForNotificationWithTimeout(interval_)) {
    v1::HeartbeatRequest request;
    request.set_job_id(identity_.job_id);
    request.set_member_id(member_id_);
    {
      absl::MutexLock lock(&mu_);
      request.set_generation(watched_);
    }
    auto reply = beats_.Beat(request);
    absl::MutexLock callback_lock(&callback_mu_);
    std::function<void()> fire;
    {
      absl::MutexLock lock(&mu_);
      if (!reply.ok()) {
        if (reply.status().code() == absl::StatusCode::kNotFound) lost_ = true;
      } else if (reply->generation() >= latest_generation_) {  // Generations only grow.
        latest_generation_ = reply->generation();
        in_latest_ = reply->in_generation() && reply->state() == v1::GenerationInfo::STATE_RUNNING;
        change_pending_ = in_latest_ && reply->change_pending();
        stop_requested_ |= reply->stop_requested();
      }
      // The probes (worker/health): a reply is a successful heartbeat.
      if (reply.ok()) {
        WorkerHealth::Process().RecordContact(absl::Now(), in_latest_);
      } else {
        WorkerHealth::Process().RecordFailedContact();
      }
      if (watched_ != 0 && on_end_ && EndedLocked(watched_)) {
        fire = std::move(on_end_);
        on_end_ = nullptr;
      }
    }
    if (fire) fire();
  }
}

absl::StatusOr<v1::GenerationInfo> WorkerSession::AwaitGeneration(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  v1::GetGenerationRequest request;
  request.set_job_id(identity_.job_id);
  request.set_member_id(member_id_);
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (lost_)
        return absl::NotFoundError(
            "the coordinator no longer knows this member (lease expired or coordinator restarted)");
    }
    if (stop_token_.stop_requested()) return absl::CancelledError("leave requested");
    auto info = client_.GetGeneration(request);
    if (info.ok() && info->job_state() == v1::JOB_STATE_FAILED) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", identity_.job_id, " failed: ", info->job_state_reason()));
    }
    if (info.ok() && info->job_state() == v1::JOB_STATE_COMPLETED) return info;
    if (info.ok() && info->state() == v1::GenerationInfo::STATE_RUNNING && info->rank() >= 0) {
      return info;
    }
    if (!info.ok() && info.status().code() == absl::StatusCode::kNotFound) return info.status();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError("no generation including this worker formed in time");
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

void WorkerSession::WatchForEnd(uint64_t generation, std::function<void()> on_end) {
  absl::MutexLock lock(&mu_);
  watched_ = generation;
  on_end_ = std::move(on_end);
}

void WorkerSession::StopWatching() {
  absl::MutexLock callback_lock(&callback_mu_);
  absl::MutexLock lock(&mu_);
  watched_ = 0;
  on_end_ = nullptr;
}

bool WorkerSession::Ended(uint64_t generation) const {
  absl::MutexLock lock(&mu_);
  return EndedLocked(generation);
}

// A heartbeat reply older than `generation` says nothing about it; a newer
// generation, or the same one no longer running with this member, ends it.
bool WorkerSession::EndedLocked(uint64_t generation) const {
  return lost_ || latest_generation_ > generation ||
         (latest_generation_ == generation && !in_latest_);
}

bool WorkerSession::AwaitEnd(uint64_t generation, absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  while (!Ended(generation)) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return true;
}

bool WorkerSession::AwaitForgotten(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&lost_), timeout);
}

void WorkerSession::ReportFailure(uint64_t generation, int failed_rank, const std::string& reason) {
  v1::ReportFailureRequest request;
  request.set_job_id(identity_.job_id);
  request.set_member_id(member_id_);
  request.set_generation(generation);
  request.set_failed_rank(failed_rank);
  request.set_reason(reason);
  (void)client_.ReportFailure(request);  // Best effort: the lease covers a lost report.
}

void WorkerSession::ReportHandoff(uint64_t generation, int64_t step,
                                  const std::vector<int>& leaving_ranks) {
  v1::ReportHandoffRequest request;
  request.set_job_id(identity_.job_id);
  request.set_member_id(member_id_);
  request.set_generation(generation);
  request.set_step(step);
  for (int rank : leaving_ranks) request.add_leaving_ranks(rank);
  (void)client_.ReportHandoff(request);  // Best effort: the handoff grace covers a lost one.
}

bool WorkerSession::ChangePending() const {
  absl::MutexLock lock(&mu_);
  return change_pending_;
}

bool WorkerSession::JobStopped() const {
  absl::MutexLock lock(&mu_);
  return stop_requested_;
}

void WorkerSession::Leave(bool job_completed) {
  v1::LeaveRequest request;
  request.set_job_id(identity_.job_id);
  request.set_member_id(member_id_);
  request.set_job_completed(job_completed);
  (void)client_.Leave(request);  // Best effort: the lease covers a lost leave.
}

}  // namespace zeroshard
