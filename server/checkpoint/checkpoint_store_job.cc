// CheckpointStore: the checks of requests against the running job
// ([Note: sized by the job] in checkpoint_store_internal.h).
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rpc/plan_proto.h"
#include "common/status_macros.h"
#include "google/protobuf/util/message_differencer.h"
#include "server/checkpoint/checkpoint_store.h"
#include "server/checkpoint/checkpoint_store_internal.h"
#include "server/core/validation.h"

namespace zeroshard::server {

void CheckpointStore::SetJobSource(CheckpointJobSource source) {
  absl::MutexLock lock(&job_mu_);
  job_source_ = std::move(source);
}

absl::StatusOr<std::optional<CheckpointJob>> CheckpointStore::Job() const {
  CheckpointJobSource source;
  {
    absl::MutexLock lock(&job_mu_);
    source = job_source_;
  }
  if (!source) return std::optional<CheckpointJob>();
  ZS_ASSIGN_OR_RETURN(CheckpointJob job, source());
  return std::optional<CheckpointJob>(std::move(job));
}

absl::Status CheckpointStore::CheckReadJob(absl::string_view job_id) const {
  ZS_ASSIGN_OR_RETURN(std::optional<CheckpointJob> job, Job());
  if (!job.has_value()) return absl::OkStatus();
  return CheckJobId(std::string(job_id), job->job_id, /*allow_empty=*/true);
}

absl::Status CheckpointStore::CheckBeginAgainstJob(const v1::BeginCheckpointRequest& req) const {
  ZS_ASSIGN_OR_RETURN(std::optional<CheckpointJob> job, Job());
  if (!job.has_value()) return absl::OkStatus();
  ZS_RETURN_IF_ERROR(CheckJobId(req.job_id(), job->job_id));
  ZS_RETURN_IF_ERROR(CheckStep(req.step(), job->steps, "step"));
  ZS_RETURN_IF_ERROR(CheckBetween(req.world_size(), 1, job->max_world_size, "world_size"));
  if (req.attempt() > job->generation) {
    return absl::FailedPreconditionError(absl::StrCat(
        "attempt ", req.attempt(), " is above the newest generation ", job->generation));
  }
  if (req.attempt() == job->generation && job->world_size > 0 &&
      req.world_size() != job->world_size) {
    return absl::FailedPreconditionError(absl::StrCat("world_size ", req.world_size(),
                                                      " is not generation ", job->generation,
                                                      "'s world size ", job->world_size));
  }
  if (job->units.empty()) {
    return absl::FailedPreconditionError("the job's units are not known yet (no worker joined)");
  }
  ZS_ASSIGN_OR_RETURN(ShardPlan expected,
                      MakeShardPlan(job->units, req.world_size(), job->alignment));
  v1::ShardPlan want;
  ShardPlanToProto(expected, &want);
  if (!google::protobuf::util::MessageDifferencer::Equals(want, req.plan())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "plan is not the job's plan at world_size ", req.world_size(), " and alignment ",
        job->alignment, " (", job->units.size(), " units, ", expected.total_numel(),
        " elements; the request has ", req.plan().units_size(), " units)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<CheckpointStore::PendingSave> CheckpointStore::PendingOf(
    const std::string& checkpoint_id) const {
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<Pending> p, FindPending(checkpoint_id));
  return PendingSave{p->attempt, p->step};  // Set when it is made, never changed.
}

}  // namespace zeroshard::server
