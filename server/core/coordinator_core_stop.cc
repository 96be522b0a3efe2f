// CoordinatorCore's operator stop (coordinator.proto, StopJob): the job
// ends early at a step boundary, keeping what it trained.
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/model/job_config.h"
#include "common/status_macros.h"
#include "server/core/coordinator_core.h"
#include "server/core/validation.h"

namespace zeroshard::server {

absl::StatusOr<v1::StopJobResponse> CoordinatorCore::StopJob(const v1::StopJobRequest& r) {
  ZS_RETURN_IF_ERROR(CheckJobId(r.job_id(), options_.job_id, /*allow_empty=*/true));
  EffectsLock lock(this);
  if (membership_.job_ended()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the job already ended: ", JobStateName(membership_.job_state()), " (",
                     membership_.job_state_reason(), ")"));
  }
  if (!stop_requested_) {
    effects_.log.push_back(absl::StrCat("stop requested after step ", training_.step(),
                                        ": the ranks save and complete the job at their next "
                                        "step boundary"));
  }
  stop_requested_ = true;
  MaybeCompleteStopLocked();
  v1::StopJobResponse out;
  out.set_job_state(JobStateProtoLocked());
  out.set_last_step(training_.step());
  absl::StatusOr<JobConfig> job = JobConfig::FromJson(job_config_json_);
  out.set_saves_checkpoint(job.ok() && !job->checkpoint_dir.empty());
  return out;
}

// Nothing trains without a generation, and none can form with too few
// members: there is no step boundary to wait for. Checked when the stop
// comes and again whenever members go (a rank lost before the boundary, or
// ranks whose completed Leave did not count), so a stop never hangs.
void CoordinatorCore::MaybeCompleteStopLocked() {
  if (!stop_requested_ || membership_.job_ended()) return;
  if (membership_.state() != GenerationState::kRunning &&
      membership_.Eligible() < options_.min_workers) {
    CompleteStoppedLocked();
  }
}

void CoordinatorCore::CompleteStoppedLocked() {
  if (membership_.job_ended()) return;
  membership_.Complete(absl::StrCat(kStoppedByRequest, " at step ", training_.step()),
                       clock_->Now());
  DrainEventsLocked();
}

// [Note: completion claims] A rank's Leave with job_completed says it
// trained the job's last step, but one rank (or one stolen credential)
// must not end the job: it completes when every rank of the generation has
// left so. The first such Leave ends the generation (a rank is gone), so
// the claims remember that generation's ranked members and still count the
// Leaves of the others, now without a rank. Normally the ranks' reports of
// the last step ([Note: agreed step]) have completed the job before any
// Leave; the claims cover reports that were dropped.
bool CoordinatorCore::ClaimCompletionLocked(const Member& m) {
  if (m.rank >= 0 && completion_.generation != membership_.generation()) {
    completion_ = CompletionClaims{membership_.generation(), {}, {}};
    for (const Member* ranked : membership_.Ranked()) completion_.ranks.insert(ranked->member_id);
  }
  if (completion_.ranks.count(m.member_id) == 0) return false;
  completion_.claimed.insert(m.member_id);
  return completion_.claimed.size() == completion_.ranks.size();
}

bool IsStoppedByRequest(const std::string& job_ended_reason) {
  return absl::StartsWith(job_ended_reason, kStoppedByRequest);
}

}  // namespace zeroshard::server
