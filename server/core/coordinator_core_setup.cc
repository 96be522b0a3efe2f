// Construction (options, durable state, the job's limits), membership
// events, the job lifecycle, units and the shard plan of CoordinatorCore.
#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/infra/allocator.h"
#include "common/model/job_config.h"
#include "common/rpc/plan_proto.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
#include "server/core/coordinator_core.h"
#include "server/core/validation.h"

namespace zeroshard::server {
namespace {

absl::Status ValidateOptions(const CoreOptions& o) {
  if (auto s = CheckToken(o.job_id, "job_id", 128, true); !s.ok()) return s;
  if (o.min_workers < 1 || o.min_workers > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_workers = ", o.min_workers, " is outside [1, 65536]"));
  }
  if (o.max_workers < o.min_workers || o.max_workers > 65536) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_workers = ", o.max_workers, " is outside [min_workers = ", o.min_workers, ", 65536]"));
  }
  if (o.settle < absl::ZeroDuration() || o.settle > absl::Hours(1)) {
    return absl::InvalidArgumentError("settle is outside [0 s, 3600 s]");
  }
  if (o.handoff_grace < absl::ZeroDuration() || o.handoff_grace > absl::Hours(1)) {
    return absl::InvalidArgumentError("handoff_grace is outside [0 s, 3600 s]");
  }
  if (o.heartbeat_interval <= absl::ZeroDuration() || o.heartbeat_interval > absl::Hours(1)) {
    return absl::InvalidArgumentError("heartbeat_interval is outside (0 s, 3600 s]");
  }
  if (o.lease_timeout <= o.heartbeat_interval || o.lease_timeout > absl::Hours(1)) {
    return absl::InvalidArgumentError(
        "lease_timeout must exceed heartbeat_interval and be at most 3600 s");
  }
  if (o.alignment < 1 || o.alignment > (int64_t{1} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("alignment = ", o.alignment, " is outside [1, 2^20]"));
  }
  if (o.max_kv_waits_per_caller < 1 || o.max_kv_waits < o.max_kv_waits_per_caller) {
    return absl::InvalidArgumentError(
        "max_kv_waits_per_caller must be >= 1 and at most max_kv_waits");
  }
  if (!o.job_config_json.empty() && !nlohmann::json::accept(o.job_config_json)) {
    return absl::InvalidArgumentError("job_config_json is not valid JSON");
  }
  return absl::OkStatus();
}

std::string UnitsToJson(const google::protobuf::RepeatedPtrField<v1::UnitSpec>& units) {
  v1::JoinRequest holder;
  *holder.mutable_units() = units;
  std::string out;
  // Serialising a valid message cannot fail.
  (void)google::protobuf::util::MessageToJsonString(holder, &out);
  return out;
}

// The job's limits from its config; a config that is not a JobConfig (an
// opaque one in tests) has no known steps and the default budget.
CoordinatorCore::JobLimits LimitsFromConfig(const std::string& json) {
  CoordinatorCore::JobLimits limits;
  absl::StatusOr<JobConfig> config = JobConfig::FromJson(json);
  if (!config.ok()) return limits;
  limits.steps = config->steps;
  limits.max_failures = config->max_failures;
  return limits;
}

// An ended job stays ended unless the config it is served with now allows
// more: more steps than were done (for a job an operator stopped: more than
// `steps_before`, those of the config it stopped under), or a budget the
// failures fit in. A state dir from before job lifecycles whose last step
// reached `steps` completes.
void ReopenIfConfigAllows(const CoordinatorCore::JobLimits& limits, int64_t steps_before,
                          DurableSnapshot* snap) {
  const int64_t done = IsStoppedByRequest(snap->job_ended_reason)
                           ? std::max(snap->last_step, steps_before)
                           : snap->last_step;
  if (snap->job_ended == "completed" && limits.steps > done) {
    std::fprintf(stderr,
                 "zeroshard-coordinator: the job completed at step %lld; its config now "
                 "asks for %lld steps: running again\n",
                 static_cast<long long>(snap->last_step), static_cast<long long>(limits.steps));
    snap->job_ended.clear();
    snap->job_ended_reason.clear();
  } else if (snap->job_ended == "failed" && snap->failures <= limits.max_failures) {
    std::fprintf(stderr,
                 "zeroshard-coordinator: the job failed after %lld failures; its config "
                 "now allows %lld: running again\n",
                 static_cast<long long>(snap->failures),
                 static_cast<long long>(limits.max_failures));
    snap->job_ended.clear();
    snap->job_ended_reason.clear();
  } else if (snap->job_ended.empty() && limits.steps > 0 && snap->last_step >= limits.steps) {
    snap->job_ended = "completed";
    snap->job_ended_reason = absl::StrCat("step ", snap->last_step, " of ", limits.steps, " done");
  }
}

MembershipStart StartFrom(const DurableSnapshot& snap) {
  MembershipStart start;
  start.last_generation = snap.generation;
  start.member_id_base = snap.restarts << 32;
  start.first_reason = snap.restarts > 0 ? ChangeReason::kCoordinatorRestart : ChangeReason::kStart;
  start.failures = snap.failures;
  if (snap.job_ended == "completed") start.ended = JobState::kCompleted;
  if (snap.job_ended == "failed") start.ended = JobState::kFailed;
  start.ended_reason = snap.job_ended_reason;
  return start;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorCore>> CoordinatorCore::Create(
    const CoreOptions& options, std::unique_ptr<DurableState> durable, const Clock* clock,
    MetricsRegistry* metrics) {
  ZS_RETURN_IF_ERROR(ValidateOptions(options));
  DurableSnapshot snap = durable->Get();
  const bool restarted = !snap.job_id.empty();
  if (restarted && snap.job_id != options.job_id) {
    return absl::FailedPreconditionError(absl::StrCat("state dir ", durable->dir(),
                                                      " belongs to job \"", snap.job_id,
                                                      "\", not job_id \"", options.job_id, "\""));
  }
  const int64_t steps_before = LimitsFromConfig(snap.job_config_json).steps;
  if (!options.job_config_json.empty()) snap.job_config_json = options.job_config_json;
  if (snap.job_config_json.empty()) snap.job_config_json = "{}";
  if (restarted) {
    // [Note: generation after restart]
    ++snap.restarts;
    ++snap.generation;
    ZS_RETURN_IF_ERROR(durable->SetGeneration(snap.generation));
  }
  ZS_RETURN_IF_ERROR(durable->SetJob(options.job_id, snap.job_config_json, snap.restarts));
  const JobLimits limits = LimitsFromConfig(snap.job_config_json);
  ReopenIfConfigAllows(limits, steps_before, &snap);
  ZS_RETURN_IF_ERROR(durable->SetLifecycle(snap.failures, snap.job_ended, snap.job_ended_reason));
  std::unique_ptr<CoordinatorCore> core(
      new CoordinatorCore(options, std::move(durable), clock, metrics, snap, limits));
  if (!options.units.empty()) {
    // The job config's model wins over units a Join wrote before (issue 16).
    v1::JoinRequest holder;
    UnitSpecsToProto(options.units, holder.mutable_units());
    absl::MutexLock lock(&core->mu_);
    ZS_RETURN_IF_ERROR(core->SetUnitsLocked(holder.units()));
  } else if (!snap.units_json.empty()) {
    v1::JoinRequest holder;
    if (!google::protobuf::util::JsonStringToMessage(snap.units_json, &holder).ok()) {
      return absl::DataLossError("the state dir's units_json does not parse");
    }
    absl::MutexLock lock(&core->mu_);
    ZS_RETURN_IF_ERROR(core->SetUnitsLocked(holder.units()));
  }
  return core;
}

CoordinatorCore::CoordinatorCore(const CoreOptions& options, std::unique_ptr<DurableState> durable,
                                 const Clock* clock, MetricsRegistry* metrics,
                                 const DurableSnapshot& snap, const JobLimits& limits)
    : options_(options),
      limits_(limits),
      durable_(std::move(durable)),
      clock_(clock),
      membership_(MembershipOptions{options.min_workers, options.max_workers, options.settle,
                                    options.lease_timeout,
                                    std::min(2 * options.heartbeat_interval, options.lease_timeout),
                                    limits.max_failures, options.handoff_grace},
                  StartFrom(snap)),
      waiters_(options.max_kv_waits_per_caller, options.max_kv_waits),
      training_(metrics, snap.last_step, snap.last_loss),
      job_config_json_(snap.job_config_json),
      last_tick_ns_(absl::ToUnixNanos(clock->Now())),
      metrics_(metrics, options.insecure) {
  absl::MutexLock lock(&mu_);
  kv_.Reset(KvPrefix(options_.job_id, membership_.generation()));
  UpdateGaugesLocked();
}

void CoordinatorCore::UpdateGaugesLocked() {
  metrics_.Set(CoreGauges{membership_.generation(), membership_.world_size(),
                          membership_.Waiting().size(), kv_.size(), kv_.bytes(), waiters_.size(),
                          membership_.job_state(), membership_.failures()});
}

CoordinatorCore::EffectsLock::EffectsLock(CoordinatorCore* core) : core_(core) {
  core_->mu_.Lock();
}

CoordinatorCore::EffectsLock::~EffectsLock() {
  if (core_->effects_.empty()) {
    core_->mu_.Unlock();
    return;
  }
  CoreEffects effects = std::move(core_->effects_);
  core_->effects_ = CoreEffects();
  struct Turn {
    CoordinatorCore* core;
    uint64_t ticket;
  } turn{core_, ++core_->effects_issued_};
  auto mine = +[](Turn* t) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return t->core->effects_applied_ + 1 == t->ticket;
  };
  // Earlier tickets never need mu_, so waiting for them while holding it
  // cannot deadlock.
  if (!effects.durable_before_visible) core_->mu_.Unlock();
  core_->apply_mu_.LockWhen(absl::Condition(mine, &turn));
  effects.Apply(*core_->durable_);
  core_->effects_applied_ = turn.ticket;
  core_->apply_mu_.Unlock();
  if (effects.durable_before_visible) core_->mu_.Unlock();
}

void CoordinatorCore::PersistLifecycleLocked() {
  const JobState s = membership_.job_state();
  const bool ended = s == JobState::kCompleted || s == JobState::kFailed;
  effects_.lifecycle = CoreEffects::Lifecycle{membership_.failures(), ended ? JobStateName(s) : "",
                                              membership_.job_state_reason()};
  effects_.durable_before_visible |= ended;
}

void CoordinatorCore::MaybeCompleteLocked(int64_t step) {
  if (limits_.steps <= 0 || step < limits_.steps || membership_.job_ended()) return;
  membership_.Complete(absl::StrCat("step ", step, " of ", limits_.steps, " done"), clock_->Now());
  DrainEventsLocked();
}

v1::JobState CoordinatorCore::JobStateProtoLocked() const {
  switch (membership_.job_state()) {
    case JobState::kWaiting:
      return v1::JOB_STATE_WAITING;
    case JobState::kRunning:
      return v1::JOB_STATE_RUNNING;
    case JobState::kCompleted:
      return v1::JOB_STATE_COMPLETED;
    case JobState::kFailed:
      return v1::JOB_STATE_FAILED;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

void CoordinatorCore::DrainEventsLocked() {
  for (const MembershipEvent& e : membership_.TakeEvents()) {
    switch (e.kind) {
      case MembershipEvent::Kind::kMemberRemoved:
        metrics_.MemberRemoved(e.reason);
        member_labels_.erase(e.member_id);
        if (e.rank >= 0 &&
            (e.reason == ChangeReason::kFailure || e.reason == ChangeReason::kLeaseExpired)) {
          NoteLostLocked(e);
        }
        if (e.reason == ChangeReason::kFailure) {
          effects_.log.push_back(absl::StrCat("member ", e.member_id, " removed: silent since a ",
                                              "failure report in generation ", e.generation));
        }
        break;
      case MembershipEvent::Kind::kFailureCounted:
        PersistLifecycleLocked();
        break;
      case MembershipEvent::Kind::kJobEnded:
        effects_.log.push_back(absl::StrCat("job ", options_.job_id, " ",
                                            JobStateName(membership_.job_state()), ": ",
                                            membership_.job_state_reason()));
        PersistLifecycleLocked();
        training_.ThroughputStopped();
        ++change_number_;  // Watchers learn that no generation will form.
        break;
      case MembershipEvent::Kind::kGenerationEnded:
        // The generation's keys die with it; a new communicator must not
        // read a dead peer's address.
        kv_.Reset(KvPrefix(options_.job_id, e.generation) + "ended/");
        EndWaitsLocked(membership_.CheckRunning(e.generation, "generation"));
        training_.ClearRanks();
        metrics_.SetRanks({});
        plan_.Clear();
        ++change_number_;
        break;
      case MembershipEvent::Kind::kGenerationFormed:
        kv_.Reset(KvPrefix(options_.job_id, e.generation));
        kv_.set_owner_limit(kMaxStoreBytes /
                            static_cast<size_t>(std::max(1, membership_.world_size())));
        EndWaitsLocked(absl::AbortedError(absl::StrCat("generation ", e.generation, " formed")));
        training_.ClearRanks();
        UpdateRankInfoLocked();
        RebuildPlanLocked();
        ++generation_changes_;
        metrics_.GenerationFormed(e.reason);
        ++change_number_;
        effects_.generation = e.generation;
        break;
    }
  }
  UpdateGaugesLocked();
}

void CoordinatorCore::RebuildPlanLocked() {
  plan_.Clear();
  if (!units_known_ || membership_.state() != GenerationState::kRunning) return;
  absl::StatusOr<ShardPlan> plan =
      MakeShardPlan(units_, membership_.world_size(), options_.alignment);
  ZS_CHECK(plan.ok());  // Units were validated with MakeShardPlan at Join.
  ShardPlanToProto(*plan, &plan_);
}

absl::Status CoordinatorCore::SetUnitsLocked(
    const google::protobuf::RepeatedPtrField<v1::UnitSpec>& units) {
  absl::StatusOr<std::vector<UnitSpec>> parsed = UnitSpecsFromProto(units);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("units: ", parsed.status().message()));
  }
  if (auto plan = MakeShardPlan(*parsed, 1, options_.alignment); !plan.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("units: ", plan.status().message()));
  }
  if (units_known_) {
    const std::string diff = DescribeUnitsDifference(units_, *parsed);
    if (!diff.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the joiner's units differ from the job's: ", diff));
    }
    return absl::OkStatus();
  }
  units_ = std::move(*parsed);
  units_known_ = true;
  RebuildPlanLocked();
  if (auto s = durable_->SetUnits(UnitsToJson(units)); !s.ok()) return s;
  return absl::OkStatus();
}

}  // namespace zeroshard::server
