// Construction, membership RPCs, generation info and Tick. The KV and
// training-state RPCs are in coordinator_core_kv.cc.
#include "server/core/coordinator_core.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/rpc/plan_proto.h"
#include "common/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"
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
  if (o.heartbeat_interval <= absl::ZeroDuration() || o.heartbeat_interval > absl::Hours(1)) {
    return absl::InvalidArgumentError("heartbeat_interval is outside (0 s, 3600 s]");
  }
  if (o.handoff_grace < absl::ZeroDuration() || o.handoff_grace > absl::Hours(1)) {
    return absl::InvalidArgumentError("handoff_grace is outside [0 s, 3600 s]");
  }
  if (o.lease_timeout <= o.heartbeat_interval || o.lease_timeout > absl::Hours(1)) {
    return absl::InvalidArgumentError(
        "lease_timeout must exceed heartbeat_interval and be at most 3600 s");
  }
  if (o.alignment < 1 || o.alignment > (int64_t{1} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("alignment = ", o.alignment, " is outside [1, 2^20]"));
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

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorCore>> CoordinatorCore::Create(
    const CoreOptions& options, std::unique_ptr<DurableState> durable, const Clock* clock,
    MetricsRegistry* metrics) {
  ZS_RETURN_IF_ERROR(ValidateOptions(options));
  DurableSnapshot snap = durable->Get();
  const bool restarted = !snap.job_id.empty();
  if (restarted && snap.job_id != options.job_id) {
    return absl::FailedPreconditionError(
        absl::StrCat("state dir ", durable->dir(), " belongs to job \"", snap.job_id,
                     "\", not job_id \"", options.job_id, "\""));
  }
  if (!options.job_config_json.empty()) snap.job_config_json = options.job_config_json;
  if (snap.job_config_json.empty()) snap.job_config_json = "{}";
  if (restarted) {
    // [Note: generation after restart]
    ++snap.restarts;
    ++snap.generation;
    ZS_RETURN_IF_ERROR(durable->SetGeneration(snap.generation));
  }
  ZS_RETURN_IF_ERROR(durable->SetJob(options.job_id, snap.job_config_json, snap.restarts));
  std::unique_ptr<CoordinatorCore> core(
      new CoordinatorCore(options, std::move(durable), clock, metrics, snap));
  if (!snap.units_json.empty()) {
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
                                 const DurableSnapshot& snap)
    : options_(options),
      durable_(std::move(durable)),
      clock_(clock),
      membership_(MembershipOptions{options.min_workers, options.max_workers, options.settle,
                                    options.lease_timeout, options.handoff_grace},
                  snap.generation, snap.restarts << 32,
                  snap.restarts > 0 ? "coordinator_restart" : "start"),
      training_(metrics, snap.last_step, snap.last_loss),
      job_config_json_(snap.job_config_json),
      last_tick_ns_(absl::ToUnixNanos(clock->Now())),
      generation_metric_(metrics->Gauge("zeroshard_generation",
                                        "Current generation number (0 = none formed yet).")),
      workers_metric_(metrics->Gauge("zeroshard_workers", "World size of the running generation.")),
      waiting_metric_(metrics->Gauge("zeroshard_waiting_workers",
                                     "Live members waiting for the next generation.")),
      changes_metric_(metrics->Counter("zeroshard_generation_changes_total",
                                       "Generations formed, by the reason the previous one ended.",
                                       {"reason"})),
      heartbeats_metric_(metrics->Counter("zeroshard_heartbeats_total", "Heartbeats accepted.")),
      joins_metric_(metrics->Counter("zeroshard_joins_total", "Members admitted by Join.")),
      removals_metric_(metrics->Counter("zeroshard_member_removals_total",
                                        "Members removed, by reason.", {"reason"})),
      kv_keys_metric_(metrics->Gauge("zeroshard_kv_keys", "Keys in the rendezvous store.")),
      kv_bytes_metric_(
          metrics->Gauge("zeroshard_kv_bytes", "Bytes of keys and values in the rendezvous store.")) {
  absl::MutexLock lock(&mu_);
  kv_.Reset(KvPrefix(options_.job_id, membership_.generation()));
  UpdateGaugesLocked();
}

void CoordinatorCore::UpdateGaugesLocked() {
  generation_metric_->Set({}, static_cast<double>(membership_.generation()));
  workers_metric_->Set({}, membership_.world_size());
  waiting_metric_->Set({}, static_cast<double>(membership_.Waiting().size()));
  kv_keys_metric_->Set({}, static_cast<double>(kv_.size()));
  kv_bytes_metric_->Set({}, static_cast<double>(kv_.bytes()));
}

void CoordinatorCore::DrainEventsLocked() {
  for (const MembershipEvent& e : membership_.TakeEvents()) {
    switch (e.kind) {
      case MembershipEvent::Kind::kMemberRemoved:
        removals_metric_->Add({e.reason});
        break;
      case MembershipEvent::Kind::kGenerationEnded:
        // The generation's keys die with it; a new communicator must not
        // read a dead peer's address.
        kv_.Reset(KvPrefix(options_.job_id, e.generation) + "ended/");
        training_.ClearRanks();
        plan_.Clear();
        ++change_number_;
        break;
      case MembershipEvent::Kind::kGenerationFormed:
        kv_.Reset(KvPrefix(options_.job_id, e.generation));
        training_.ClearRanks();
        RebuildPlanLocked();
        ++generation_changes_;
        changes_metric_->Add({e.reason});
        ++change_number_;
        // A failed write leaves the old counter on disk; the restart bump
        // still keeps numbers increasing, so serving goes on.
        if (auto s = durable_->SetGeneration(e.generation); !s.ok()) {
          std::fprintf(stderr, "zeroshard-coordinator: persisting generation: %s\n",
                       s.ToString().c_str());
        }
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

absl::StatusOr<v1::JoinResponse> CoordinatorCore::Join(const v1::JoinRequest& r) {
  ZS_RETURN_IF_ERROR(CheckJobId(r.job_id(), options_.job_id));
  ZS_RETURN_IF_ERROR(CheckToken(r.worker_id(), "worker_id", kMaxWorkerIdBytes, true));
  ZS_RETURN_IF_ERROR(CheckToken(r.host(), "host", kMaxHostBytes, false));
  absl::MutexLock lock(&mu_);
  if (shutdown_) return absl::UnavailableError("the coordinator is shutting down");
  if (membership_.live_members() >= options_.max_members) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the job has ", options_.max_members, " live members already"));
  }
  if (r.units_size() > 0) ZS_RETURN_IF_ERROR(SetUnitsLocked(r.units()));
  const uint64_t id = membership_.Join(r.worker_id(), r.host(), clock_->Now());
  joins_metric_->Add({});
  DrainEventsLocked();
  v1::JoinResponse out;
  out.set_member_id(id);
  out.set_heartbeat_interval_ms(absl::ToInt64Milliseconds(options_.heartbeat_interval));
  out.set_lease_timeout_ms(absl::ToInt64Milliseconds(options_.lease_timeout));
  out.set_generation(membership_.generation());
  return out;
}

absl::StatusOr<v1::HeartbeatResponse> CoordinatorCore::Heartbeat(const v1::HeartbeatRequest& r) {
  ZS_RETURN_IF_ERROR(CheckJobId(r.job_id(), options_.job_id));
  ZS_RETURN_IF_ERROR(CheckMemberId(r.member_id()));
  absl::MutexLock lock(&mu_);
  ZS_RETURN_IF_ERROR(membership_.Heartbeat(r.member_id(), clock_->Now()));
  // A heartbeat naming an old generation is how a worker learns of the new
  // one, so it is answered, not refused; only a future one is nonsense.
  if (r.generation() > membership_.generation()) {
    return absl::InvalidArgumentError(
        absl::StrCat("generation ", r.generation(), " is ahead of the current generation ",
                     membership_.generation()));
  }
  heartbeats_metric_->Add({});
  const Member* m = membership_.Find(r.member_id());
  v1::HeartbeatResponse out;
  out.set_generation(membership_.generation());
  out.set_in_generation(m->rank >= 0);
  out.set_rank(m->rank);
  out.set_world_size(membership_.world_size());
  out.set_change_pending(m->rank >= 0 && membership_.change_pending());
  out.set_state(membership_.state() == GenerationState::kRunning
                    ? v1::GenerationInfo::STATE_RUNNING
                    : v1::GenerationInfo::STATE_WAITING);
  return out;
}

absl::Status CoordinatorCore::Leave(const v1::LeaveRequest& r) {
  ZS_RETURN_IF_ERROR(CheckJobId(r.job_id(), options_.job_id));
  ZS_RETURN_IF_ERROR(CheckMemberId(r.member_id()));
  absl::MutexLock lock(&mu_);
  ZS_RETURN_IF_ERROR(membership_.Leave(r.member_id(), clock_->Now()));
  DrainEventsLocked();
  return absl::OkStatus();
}

absl::StatusOr<v1::ReportFailureResponse> CoordinatorCore::ReportFailure(
    const v1::ReportFailureRequest& r) {
  ZS_RETURN_IF_ERROR(CheckJobId(r.job_id(), options_.job_id));
  ZS_RETURN_IF_ERROR(CheckMemberId(r.member_id()));
  if (r.reason().size() > kMaxReasonBytes) {
    return absl::InvalidArgumentError(absl::StrCat("reason is ", r.reason().size(),
                                                   " bytes; the limit is ", kMaxReasonBytes));
  }
  if (r.failed_rank() < -1) {
    return absl::InvalidArgumentError(absl::StrCat("failed_rank = ", r.failed_rank(), " < -1"));
  }
  absl::MutexLock lock(&mu_);
  if (r.failed_rank() >= membership_.world_size() && r.generation() == membership_.generation()) {
    return absl::InvalidArgumentError(absl::StrCat("failed_rank = ", r.failed_rank(),
                                                   " is not below world size ",
                                                   membership_.world_size()));
  }
  ZS_RETURN_IF_ERROR(r.handoff()
                         ? membership_.Handoff(r.member_id(), r.generation(), clock_->Now())
                         : membership_.ReportFailure(r.member_id(), r.generation(),
                                                     clock_->Now()));
  DrainEventsLocked();
  v1::ReportFailureResponse out;
  out.set_generation(membership_.generation());
  return out;
}

v1::MemberInfo CoordinatorCore::MemberInfoLocked(const Member& m) const {
  v1::MemberInfo info;
  info.set_member_id(m.member_id);
  info.set_worker_id(m.worker_id);
  info.set_host(m.host);
  info.set_rank(m.rank);
  info.set_last_heartbeat_age_seconds(
      absl::ToDoubleSeconds(clock_->Now() - m.last_heartbeat));
  return info;
}

absl::StatusOr<v1::GenerationInfo> CoordinatorCore::GenerationInfoLocked(
    uint64_t member_id) const {
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
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  membership_.Tick(now);
  DrainEventsLocked();
  last_tick_ns_.store(absl::ToUnixNanos(now), std::memory_order_release);
}

void CoordinatorCore::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
}

uint64_t CoordinatorCore::generation() const {
  absl::MutexLock lock(&mu_);
  return membership_.generation();
}

GenerationState CoordinatorCore::state() const {
  absl::MutexLock lock(&mu_);
  return membership_.state();
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

absl::Time CoordinatorCore::last_tick() const {
  return absl::FromUnixNanos(last_tick_ns_.load(std::memory_order_acquire));
}

}  // namespace zeroshard::server
