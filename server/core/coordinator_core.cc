// Membership RPCs, generation info and Tick. Construction, membership
// events and the job lifecycle are in coordinator_core_setup.cc; the KV and
// training-state RPCs in coordinator_core_kv.cc.
#include "server/core/coordinator_core.h"

#include <cmath>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/rpc/plan_proto.h"
#include "common/status_macros.h"
#include "server/core/validation.h"

namespace zeroshard::server {

absl::StatusOr<v1::JoinResponse> CoordinatorCore::Join(const v1::JoinRequest& r) {
  ZS_RETURN_IF_ERROR(CheckJobId(r.job_id(), options_.job_id));
  ZS_RETURN_IF_ERROR(CheckToken(r.worker_id(), "worker_id", kMaxWorkerIdBytes, true));
  ZS_RETURN_IF_ERROR(CheckToken(r.host(), "host", kMaxHostBytes, false));
  ZS_RETURN_IF_ERROR(CheckToken(r.hostname(), "hostname", kMaxHostBytes, false));
  ZS_RETURN_IF_ERROR(CheckToken(r.pod(), "pod", kMaxHostBytes, false));
  EffectsLock lock(this);
  if (shutdown_) return absl::UnavailableError("the coordinator is shutting down");
  if (membership_.live_members() >= options_.max_members) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the job has ", options_.max_members, " live members already"));
  }
  if (membership_.job_ended()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", options_.job_id, " is ", JobStateName(membership_.job_state()), " (",
                     membership_.job_state_reason(), "); it admits no members"));
  }
  if (r.units_size() > 0) ZS_RETURN_IF_ERROR(SetUnitsLocked(r.units()));
  ZS_ASSIGN_OR_RETURN(const uint64_t id, membership_.Join(r.worker_id(), r.host(), clock_->Now()));
  RememberLabelsLocked(id, r);
  metrics_.Joined();
  DrainEventsLocked();
  v1::JoinResponse out;
  out.set_member_id(id);
  out.set_heartbeat_interval_ms(absl::ToInt64Milliseconds(options_.heartbeat_interval));
  out.set_lease_timeout_ms(absl::ToInt64Milliseconds(options_.lease_timeout));
  out.set_generation(membership_.generation());
  out.set_job_state(JobStateProtoLocked());
  return out;
}

absl::StatusOr<v1::HeartbeatResponse> CoordinatorCore::Heartbeat(const v1::HeartbeatRequest& r) {
  ZS_RETURN_IF_ERROR(CheckJobId(r.job_id(), options_.job_id));
  ZS_RETURN_IF_ERROR(CheckMemberId(r.member_id()));
  EffectsLock lock(this);
  ZS_RETURN_IF_ERROR(membership_.Heartbeat(r.member_id(), clock_->Now()));
  // A heartbeat naming an old generation is how a worker learns of the new
  // one, so it is answered, not refused; only a future one is nonsense.
  if (r.generation() > membership_.generation()) {
    return absl::InvalidArgumentError(absl::StrCat("generation ", r.generation(),
                                                   " is ahead of the current generation ",
                                                   membership_.generation()));
  }
  metrics_.Heartbeat();
  const Member* m = membership_.Find(r.member_id());
  v1::HeartbeatResponse out;
  out.set_generation(membership_.generation());
  out.set_in_generation(m->rank >= 0);
  out.set_rank(m->rank);
  out.set_world_size(membership_.world_size());
  out.set_change_pending(m->rank >= 0 && membership_.change_pending());
  out.set_stop_requested(stop_requested_);
  out.set_state(membership_.state() == GenerationState::kRunning
                    ? v1::GenerationInfo::STATE_RUNNING
                    : v1::GenerationInfo::STATE_WAITING);
  out.set_job_state(JobStateProtoLocked());
  out.set_job_state_reason(membership_.job_state_reason());
  return out;
}

absl::Status CoordinatorCore::Leave(const v1::LeaveRequest& r) {
  ZS_RETURN_IF_ERROR(CheckJobId(r.job_id(), options_.job_id));
  ZS_RETURN_IF_ERROR(CheckMemberId(r.member_id()));
  EffectsLock lock(this);
  const Member* m = membership_.Find(r.member_id());
  // Only a member of the running generation can have trained the last step.
  if (r.job_completed() && m != nullptr && stop_requested_ && m->rank >= 0 &&
      training_.step() < limits_.steps) {
    CompleteStoppedLocked();
  } else if (r.job_completed() && m != nullptr && ClaimCompletionLocked(*m)) {
    MaybeCompleteLocked(limits_.steps);
  }
  ZS_RETURN_IF_ERROR(membership_.Leave(r.member_id(), clock_->Now()));
  DrainEventsLocked();
  MaybeCompleteStopLocked();
  return absl::OkStatus();
}

absl::StatusOr<v1::ReportFailureResponse> CoordinatorCore::ReportFailure(
    const v1::ReportFailureRequest& r) {
  ZS_RETURN_IF_ERROR(CheckJobId(r.job_id(), options_.job_id));
  ZS_RETURN_IF_ERROR(CheckMemberId(r.member_id()));
  if (r.reason().size() > kMaxReasonBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("reason is ", r.reason().size(), " bytes; the limit is ", kMaxReasonBytes));
  }
  if (r.failed_rank() < -1) {
    return absl::InvalidArgumentError(absl::StrCat("failed_rank = ", r.failed_rank(), " < -1"));
  }
  EffectsLock lock(this);
  if (r.failed_rank() >= membership_.world_size() && r.generation() == membership_.generation()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "failed_rank = ", r.failed_rank(), " is not below world size ", membership_.world_size()));
  }
  // Escaped (C-style) before it reaches the log, the status and the job's
  // reason: a newline in it must not forge a log line.
  const std::string reason = absl::CEscape(r.reason());
  NoteReportLocked(r.generation(), reason);
  ZS_RETURN_IF_ERROR(
      membership_.ReportFailure(r.member_id(), r.generation(), reason, clock_->Now()));
  effects_.log.push_back(absl::StrCat("member ", r.member_id(), " reports a failure in generation ",
                                      r.generation(), " (failed rank ", r.failed_rank(),
                                      "): ", reason));
  DrainEventsLocked();
  v1::ReportFailureResponse out;
  out.set_generation(membership_.generation());
  return out;
}

absl::StatusOr<v1::ReportHandoffResponse> CoordinatorCore::ReportHandoff(
    const v1::ReportHandoffRequest& r) {
  ZS_RETURN_IF_ERROR(CheckJobId(r.job_id(), options_.job_id));
  ZS_RETURN_IF_ERROR(CheckMemberId(r.member_id()));
  EffectsLock lock(this);
  // Checked there (in range, distinct: at most world size - 1) before the
  // log line joins them.
  const absl::Span<const int32_t> leaving(r.leaving_ranks().data(), r.leaving_ranks_size());
  ZS_RETURN_IF_ERROR(membership_.Handoff(r.member_id(), r.generation(), clock_->Now(), leaving));
  effects_.log.push_back(absl::StrCat(
      "member ", r.member_id(), " reports a handoff of generation ", r.generation(), " at step ",
      r.step(), leaving.empty() ? "" : "; leaving ranks ", absl::StrJoin(leaving, ", ")));
  DrainEventsLocked();
  v1::ReportHandoffResponse out;
  out.set_generation(membership_.generation());
  return out;
}

v1::MemberInfo CoordinatorCore::MemberInfoLocked(const Member& m) const {
  v1::MemberInfo info;
  info.set_member_id(m.member_id);
  info.set_worker_id(m.worker_id);
  info.set_host(m.host);
  if (auto it = member_labels_.find(m.member_id); it != member_labels_.end()) {
    info.set_hostname(it->second.hostname);
    info.set_pod(it->second.pod);
  }
  info.set_rank(m.rank);
  info.set_last_heartbeat_age_seconds(absl::ToDoubleSeconds(clock_->Now() - m.last_heartbeat));
  return info;
}

absl::StatusOr<v1::GenerationInfo> CoordinatorCore::GenerationInfoLocked(uint64_t member_id) const {
  v1::GenerationInfo info;
  int rank = -1;
  if (member_id != 0) {
    const Member* m = membership_.Find(member_id);
    if (m == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("member_id ", member_id, " is not a member; Join again"));
    }
    rank = m->rank;
  }
  const bool running = membership_.state() == GenerationState::kRunning;
  info.set_generation(membership_.generation());
  info.set_state(running ? v1::GenerationInfo::STATE_RUNNING : v1::GenerationInfo::STATE_WAITING);
  info.set_rank(rank);
  info.set_world_size(membership_.world_size());
  if (running) {
    info.set_kv_prefix(KvPrefix(options_.job_id, membership_.generation()));
    *info.mutable_plan() = plan_;
  }
  for (const Member* m : membership_.Ranked()) *info.add_members() = MemberInfoLocked(*m);
  info.set_job_config_json(job_config_json_);
  info.set_job_state(JobStateProtoLocked());
  info.set_job_state_reason(membership_.job_state_reason());
  return info;
}

absl::StatusOr<v1::GenerationInfo> CoordinatorCore::GetGeneration(
    const v1::GetGenerationRequest& r) {
  ZS_RETURN_IF_ERROR(CheckJobId(r.job_id(), options_.job_id));
  absl::MutexLock lock(&mu_);
  return GenerationInfoLocked(r.member_id());
}

absl::StatusOr<std::pair<v1::GenerationInfo, uint64_t>> CoordinatorCore::WaitForGenerationChange(
    const v1::GetGenerationRequest& r, uint64_t seen, absl::Time deadline) {
  ZS_RETURN_IF_ERROR(CheckJobId(r.job_id(), options_.job_id));
  struct Waiter {
    const CoordinatorCore* core;
    uint64_t seen;
  } waiter{this, seen};
  auto changed = +[](Waiter* w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return w->core->shutdown_ || w->core->change_number_ != w->seen;
  };
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithDeadline(absl::Condition(changed, &waiter), deadline);
  if (shutdown_) return absl::UnavailableError("the coordinator is shutting down");
  ZS_ASSIGN_OR_RETURN(v1::GenerationInfo info, GenerationInfoLocked(r.member_id()));
  return std::make_pair(std::move(info), change_number_);
}

void CoordinatorCore::Tick() {
  EffectsLock lock(this);
  const absl::Time now = clock_->Now();
  membership_.Tick(now);
  DrainEventsLocked();
  MaybeCompleteStopLocked();
  waiters_.Expire(now);
  UpdateGaugesLocked();
  last_tick_ns_.store(absl::ToUnixNanos(now), std::memory_order_release);
}

void CoordinatorCore::Shutdown() {
  EffectsLock lock(this);
  shutdown_ = true;
  EndWaitsLocked(absl::UnavailableError("the coordinator is shutting down"));
}

uint64_t CoordinatorCore::generation() const {
  absl::MutexLock lock(&mu_);
  return membership_.generation();
}

GenerationState CoordinatorCore::state() const {
  absl::MutexLock lock(&mu_);
  return membership_.state();
}

JobState CoordinatorCore::job_state() const {
  absl::MutexLock lock(&mu_);
  return membership_.job_state();
}

std::vector<v1::MemberInfo> CoordinatorCore::RankedMembers() const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::MemberInfo> out;
  for (const Member* m : membership_.Ranked()) out.push_back(MemberInfoLocked(*m));
  return out;
}

std::vector<UnitSpec> CoordinatorCore::units() const {
  absl::MutexLock lock(&mu_);
  return units_;
}

CoordinatorCore::JobSizes CoordinatorCore::job_sizes() const {
  absl::MutexLock lock(&mu_);
  JobSizes out;
  out.generation = membership_.generation();
  if (membership_.state() == GenerationState::kRunning) out.world_size = membership_.world_size();
  out.units = units_;
  out.steps = limits_.steps;
  out.max_workers = options_.max_workers;
  out.alignment = options_.alignment;
  return out;
}

absl::Time CoordinatorCore::last_tick() const {
  return absl::FromUnixNanos(last_tick_ns_.load(std::memory_order_acquire));
}

}  // namespace zeroshard::server
