// The rendezvous-store and training-state RPCs of CoordinatorCore.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/core/coordinator_core.h"
#include "server/core/validation.h"

namespace zeroshard::server {

absl::Status CoordinatorCore::CheckKvRequestLocked(const std::string& job_id,
                                                   uint64_t generation) const {
  ZS_RETURN_IF_ERROR(CheckJobId(job_id, options_.job_id));
  if (shutdown_) return absl::UnavailableError("the coordinator is shutting down");
  return membership_.CheckRunning(generation, "generation");
}

absl::Status CoordinatorCore::KvSet(const v1::KvSetRequest& r) {
  ZS_RETURN_IF_ERROR(ValidateKey(r.key(), "key"));
  absl::MutexLock lock(&mu_);
  ZS_RETURN_IF_ERROR(CheckKvRequestLocked(r.job_id(), r.generation()));
  ZS_RETURN_IF_ERROR(kv_.Set(r.key(), r.value()));
  waiters_.KeySet(kv_.prefix() + r.key());
  UpdateGaugesLocked();
  return absl::OkStatus();
}

absl::StatusOr<std::string> CoordinatorCore::KvGet(const v1::KvGetRequest& r) {
  ZS_RETURN_IF_ERROR(ValidateKey(r.key(), "key"));
  absl::MutexLock lock(&mu_);
  ZS_RETURN_IF_ERROR(CheckKvRequestLocked(r.job_id(), r.generation()));
  return kv_.Get(r.key());
}

absl::StatusOr<int64_t> CoordinatorCore::KvAdd(const v1::KvAddRequest& r) {
  ZS_RETURN_IF_ERROR(ValidateKey(r.key(), "key"));
  absl::MutexLock lock(&mu_);
  ZS_RETURN_IF_ERROR(CheckKvRequestLocked(r.job_id(), r.generation()));
  ZS_ASSIGN_OR_RETURN(int64_t sum, kv_.Add(r.key(), r.delta()));
  waiters_.KeySet(kv_.prefix() + r.key());
  UpdateGaugesLocked();
  return sum;
}

absl::Status CoordinatorCore::CheckReporterLocked(const v1::StepReport& r) const {
  const Member* m = membership_.Find(r.member_id());
  if (m == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("member_id ", r.member_id(), " is not a member; Join again"));
  }
  ZS_RETURN_IF_ERROR(membership_.CheckRunning(r.generation(), "generation"));
  if (m->rank < 0) {
    return absl::AbortedError(
        absl::StrCat("member_id ", r.member_id(),
                     " is waiting for the next generation; it has no rank in ", r.generation()));
  }
  if (r.rank() != m->rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank = ", r.rank(), " but member ", r.member_id(), " has rank ", m->rank));
  }
  return absl::OkStatus();
}

// [Note: valid step reports] A step is valid in [0, the job config's
// steps] (kMaxStep when unset): a step past the job's last one is no real
// work. A loss is valid when NaN (a diverged step, worth seeing) or finite
// and >= 0 (a cross-entropy); infinities and negative losses are refused.
// [Note: memory follows disk] A report that advances the job's step is
// written to the state dir first and recorded in memory only once that
// succeeded; a failed write (RESOURCE_EXHAUSTED on a full disk) keeps
// neither, and the worker's next report (the next step) tries again. The
// one exception is two ranks' reports crossing ([Note: agreed step]): the
// second record completes an agreement neither saw before its write, and
// its step is written by the call's effects, after the lock.
absl::Status CoordinatorCore::ReportStep(const v1::StepReport& r) {
  ZS_RETURN_IF_ERROR(CheckJobId(r.job_id(), options_.job_id));
  ZS_RETURN_IF_ERROR(CheckMemberId(r.member_id()));
  ZS_RETURN_IF_ERROR(TrainingState::Validate(r));
  ZS_RETURN_IF_ERROR(CheckStep(r.step(), limits_.steps, "step"));
  ZS_RETURN_IF_ERROR(CheckLoss(r.loss(), "loss"));
  ZS_RETURN_IF_ERROR(CheckLoss(r.val_loss(), "val_loss"));
  int64_t persisted = 0;
  {
    absl::MutexLock lock(&mu_);
    ZS_RETURN_IF_ERROR(CheckReporterLocked(r));
    persisted = training_.AgreedStepWith(r, membership_.world_size());
    if (persisted == training_.step()) persisted = 0;
  }
  // Persisted outside the core's lock; DurableState keeps the highest step,
  // so reports racing here cannot move it backwards.
  if (persisted > 0) ZS_RETURN_IF_ERROR(durable_->SetLastStep(persisted, r.loss()));
  EffectsLock lock(this);
  ZS_RETURN_IF_ERROR(CheckReporterLocked(r));  // The generation may have ended meanwhile.
  const int64_t before = training_.step();
  training_.Record(r, membership_.world_size());
  // Two ranks' reports crossing: each saw the other's rank behind, and this
  // record completed the agreement. Written after the lock, as any effect.
  if (training_.step() > before && training_.step() > persisted) {
    effects_.last_step = CoreEffects::LastStep{training_.step(), training_.loss()};
  }
  MaybeCompleteLocked(training_.step());
  // The last reports of a completed job are recorded, but no more steps
  // will run.
  if (membership_.job_ended()) training_.ThroughputStopped();
  return absl::OkStatus();
}

absl::StatusOr<v1::JobStatus> CoordinatorCore::GetJobStatus(const v1::GetJobStatusRequest& r) {
  ZS_RETURN_IF_ERROR(CheckJobId(r.job_id(), options_.job_id, /*allow_empty=*/true));
  absl::MutexLock lock(&mu_);
  v1::JobStatus out;
  out.set_job_id(options_.job_id);
  out.set_generation(membership_.generation());
  out.set_state(membership_.state() == GenerationState::kRunning
                    ? v1::GenerationInfo::STATE_RUNNING
                    : v1::GenerationInfo::STATE_WAITING);
  out.set_world_size(membership_.world_size());
  for (const Member* m : membership_.Ranked()) *out.add_members() = MemberInfoLocked(*m);
  for (const Member* m : membership_.Waiting()) *out.add_members() = MemberInfoLocked(*m);
  training_.FillStatus(&out);
  out.set_generation_changes(generation_changes_);
  out.set_job_state(JobStateProtoLocked());
  out.set_job_state_reason(membership_.job_state_reason());
  out.set_failures(membership_.failures());
  out.set_max_failures(limits_.max_failures);
  out.set_steps(limits_.steps);
  if (last_lost_.generation() > 0) *out.mutable_last_lost() = last_lost_;
  return out;
}

}  // namespace zeroshard::server
