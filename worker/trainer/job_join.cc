#include "worker/trainer/job_join.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace zeroshard {

absl::Status EndedJobOutcome(const v1::JobStatus& status) {
  if (status.job_state() == v1::JOB_STATE_FAILED) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", status.job_id(), " failed: ", status.job_state_reason()));
  }
  std::cout << "job " << status.job_id() << " is already completed (" << status.job_state_reason()
            << "); nothing to train: exiting\n"
            << std::flush;
  return absl::OkStatus();
}

bool JobEnded(const v1::JobStatus& status) {
  return status.job_state() == v1::JOB_STATE_COMPLETED ||
         status.job_state() == v1::JOB_STATE_FAILED;
}

absl::StatusOr<std::unique_ptr<WorkerSession>> JoinJob(CoordinatorClient& client,
                                                       const WorkerSession::Identity& identity,
                                                       const ModelConfig& model,
                                                       absl::Duration held_id_wait,
                                                       StopToken stop) {
  auto session = WorkerSession::Join(client, identity, ModelUnits(model), held_id_wait, stop);
  if (!session.ok() && stop.stop_requested()) {
    // A stop that came while joining (or rejoining) is a leave, not an error.
    std::cout << "stop requested while joining (" << session.status().message() << "): exiting\n"
              << std::flush;
    return std::unique_ptr<WorkerSession>();
  }
  if (session.ok() || !absl::IsFailedPrecondition(session.status())) return session;
  v1::GetJobStatusRequest request;
  request.set_job_id(identity.job_id);
  auto status = client.GetJobStatus(request);
  if (!status.ok() || !JobEnded(*status)) return session.status();
  ZS_RETURN_IF_ERROR(EndedJobOutcome(*status));
  return std::unique_ptr<WorkerSession>();
}

}  // namespace zeroshard
