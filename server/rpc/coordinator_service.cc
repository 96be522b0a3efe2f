#include "server/rpc/coordinator_service.h"

#include <chrono>
#include <utility>

#include "absl/synchronization/mutex.h"
#include "common/rpc/grpc_status.h"

namespace zeroshard::server {
namespace {

// The core answered with the response's `value` field (KvGet, KvAdd).
constexpr auto kSetValue = [](auto value, auto* out) { out->set_value(std::move(value)); };

// How long one wait inside WatchGeneration lasts before it checks whether
// the client went away; bounds a cancelled stream's thread to this.
constexpr absl::Duration kWatchPoll = absl::Milliseconds(500);

}  // namespace

grpc::Status CoordinatorService::Join(grpc::ServerContext*, const v1::JoinRequest* request,
                                      v1::JoinResponse* response) {
  return Reply(core_->Join(*request), response);
}

grpc::Status CoordinatorService::Heartbeat(grpc::ServerContext*,
                                           const v1::HeartbeatRequest* request,
                                           v1::HeartbeatResponse* response) {
  return Reply(HeartbeatWatchdog::Timed(watchdog_, [&] { return core_->Heartbeat(*request); }),
               response);
}

grpc::Status CoordinatorService::Leave(grpc::ServerContext*, const v1::LeaveRequest* request,
                                       v1::LeaveResponse*) {
  return ToGrpcStatus(core_->Leave(*request));
}

grpc::Status CoordinatorService::ReportFailure(grpc::ServerContext*,
                                               const v1::ReportFailureRequest* request,
                                               v1::ReportFailureResponse* response) {
  return Reply(core_->ReportFailure(*request), response);
}

grpc::Status CoordinatorService::ReportHandoff(grpc::ServerContext*,
                                               const v1::ReportHandoffRequest* request,
                                               v1::ReportHandoffResponse* response) {
  return Reply(core_->ReportHandoff(*request), response);
}

grpc::Status CoordinatorService::GetGeneration(grpc::ServerContext*,
                                               const v1::GetGenerationRequest* request,
                                               v1::GenerationInfo* response) {
  return Reply(core_->GetGeneration(*request), response);
}

grpc::Status CoordinatorService::WatchGeneration(grpc::ServerContext* context,
                                                 const v1::GetGenerationRequest* request,
                                                 grpc::ServerWriter<v1::GenerationInfo>* writer) {
  absl::StatusOr<StreamLimits::Slot> slot =
      StreamLimits::OpenOn(streams_, context->peer(), "WatchGeneration");
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  uint64_t seen = 0;
  while (!context->IsCancelled()) {
    const absl::Time client_deadline = absl::FromChrono(context->deadline());
    const absl::Time deadline = std::min(absl::Now() + kWatchPoll, client_deadline);
    auto next = core_->WaitForGenerationChange(*request, seen, deadline);
    if (!next.ok()) return ToGrpcStatus(next.status());
    if (next->second != seen) {
      if (!writer->Write(next->first)) return grpc::Status::OK;  // Client went away.
      seen = next->second;
    }
    if (absl::Now() >= client_deadline) break;
  }
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::KvSet(grpc::ServerContext*, const v1::KvSetRequest* request,
                                       v1::KvSetResponse*) {
  return ToGrpcStatus(core_->KvSet(*request));
}

grpc::Status CoordinatorService::KvGet(grpc::ServerContext*, const v1::KvGetRequest* request,
                                       v1::KvGetResponse* response) {
  return Reply(core_->KvGet(*request), response, kSetValue);
}

grpc::Status CoordinatorService::KvAdd(grpc::ServerContext*, const v1::KvAddRequest* request,
                                       v1::KvAddResponse* response) {
  return Reply(core_->KvAdd(*request), response, kSetValue);
}

grpc::Status CoordinatorService::ReportStep(grpc::ServerContext*, const v1::StepReport* request,
                                            v1::ReportStepResponse*) {
  return ToGrpcStatus(core_->ReportStep(*request));
}

grpc::Status CoordinatorService::GetJobStatus(grpc::ServerContext*,
                                              const v1::GetJobStatusRequest* request,
                                              v1::JobStatus* response) {
  return Reply(core_->GetJobStatus(*request), response);
}

grpc::Status CoordinatorService::StopJob(grpc::ServerContext*, const v1::StopJobRequest* request,
                                         v1::StopJobResponse* response) {
  return Reply(core_->StopJob(*request), response);
}

}  // namespace zeroshard::server
