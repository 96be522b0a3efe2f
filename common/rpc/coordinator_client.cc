#include "common/rpc/coordinator_client.h"

#include <algorithm>
#include <chrono>
#include <iostream>

#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/channel_arguments.h"

namespace zeroshard {

using Stub = v1::Coordinator::Stub;

absl::StatusOr<std::unique_ptr<CoordinatorClient>> CoordinatorClient::Connect(
    const std::string& target, Options options) {
  if (target.empty()) return absl::InvalidArgumentError("coordinator address is empty");
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  if (options.identity == nullptr) {
    ZS_ASSIGN_OR_RETURN(options.identity, NewCallIdentity(options.security));
  }
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                      OpenChannel(target, options.security, args, options.identity));
  return std::make_unique<CoordinatorClient>(std::move(channel), options);
}

CoordinatorClient::CoordinatorClient(std::shared_ptr<grpc::Channel> channel, Options options)
    : options_(options), channel_(std::move(channel)), stub_(v1::Coordinator::NewStub(channel_)) {}

absl::Time CoordinatorClient::Deadline(absl::Duration extra) const {
  return absl::Now() + options_.timeout + extra;
}

absl::StatusOr<v1::JoinResponse> CoordinatorClient::Join(const v1::JoinRequest& request) {
  absl::StatusOr<v1::JoinResponse> joined = Call(&Stub::Join, request, "Join");
  if (joined.ok() && options_.identity != nullptr && !joined->member_secret().empty()) {
    options_.identity->AddMember(joined->member_id(), joined->member_secret());
  }
  return joined;
}

absl::StatusOr<v1::JoinResponse> CoordinatorClient::JoinRetryingHeldId(
    const v1::JoinRequest& request, absl::Duration wait, const std::function<bool()>& stop) {
  const absl::Time deadline = absl::Now() + wait;
  absl::Duration backoff = absl::Milliseconds(200);
  bool logged = false;
  while (true) {
    absl::StatusOr<v1::JoinResponse> joined = Join(request);
    if (!IsWorkerIdHeld(joined.status()) || absl::Now() + backoff > deadline) return joined;
    if (stop && stop()) return absl::CancelledError("Join: stop requested");
    if (!logged) {
      std::cout << "worker id " << request.worker_id()
                << " is still held by a live member (an earlier run of this worker?); retrying "
                   "Join until its lease lapses (up to "
                << absl::FormatDuration(deadline - absl::Now()) << ")\n"
                << std::flush;
      logged = true;
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(2));
  }
}

absl::StatusOr<v1::HeartbeatResponse> CoordinatorClient::Heartbeat(
    const v1::HeartbeatRequest& request) {
  return Call(&Stub::Heartbeat, request, "Heartbeat");
}

absl::Status CoordinatorClient::Leave(const v1::LeaveRequest& request) {
  return Call(&Stub::Leave, request, "Leave").status();
}

absl::StatusOr<v1::ReportFailureResponse> CoordinatorClient::ReportFailure(
    const v1::ReportFailureRequest& request) {
  return Call(&Stub::ReportFailure, request, "ReportFailure");
}

absl::StatusOr<v1::ReportHandoffResponse> CoordinatorClient::ReportHandoff(
    const v1::ReportHandoffRequest& request) {
  return Call(&Stub::ReportHandoff, request, "ReportHandoff");
}

absl::StatusOr<v1::GenerationInfo> CoordinatorClient::GetGeneration(
    const v1::GetGenerationRequest& request) {
  return Call(&Stub::GetGeneration, request, "GetGeneration");
}

absl::Status CoordinatorClient::WatchGeneration(
    const v1::GetGenerationRequest& request, absl::Duration duration,
    const std::function<bool(const v1::GenerationInfo&)>& on_update) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + duration));
  std::unique_ptr<grpc::ClientReader<v1::GenerationInfo>> reader =
      stub_->WatchGeneration(&ctx, request);
  v1::GenerationInfo info;
  while (reader->Read(&info)) {
    if (!on_update(info)) {
      ctx.TryCancel();
      reader->Finish().ok();  // Drains the cancelled stream; its status is moot.
      return absl::OkStatus();
    }
  }
  return FromGrpcStatus(reader->Finish(), "WatchGeneration");
}

absl::Status CoordinatorClient::KvSet(const v1::KvSetRequest& request) {
  return Call(&Stub::KvSet, request, "KvSet").status();
}

absl::StatusOr<std::string> CoordinatorClient::KvGet(const v1::KvGetRequest& request) {
  ZS_ASSIGN_OR_RETURN(v1::KvGetResponse response, Call(&Stub::KvGet, request, "KvGet"));
  return std::move(*response.mutable_value());
}

absl::Status CoordinatorClient::KvWait(const v1::KvWaitRequest& request) {
  return Call(&Stub::KvWait, request, "KvWait",
              absl::Milliseconds(std::max<int64_t>(0, request.timeout_ms())))
      .status();
}

absl::StatusOr<int64_t> CoordinatorClient::KvAdd(const v1::KvAddRequest& request) {
  ZS_ASSIGN_OR_RETURN(v1::KvAddResponse response, Call(&Stub::KvAdd, request, "KvAdd"));
  return response.value();
}

absl::Status CoordinatorClient::ReportStep(const v1::StepReport& request) {
  return Call(&Stub::ReportStep, request, "ReportStep").status();
}

absl::StatusOr<v1::JobStatus> CoordinatorClient::GetJobStatus(
    const v1::GetJobStatusRequest& request) {
  return Call(&Stub::GetJobStatus, request, "GetJobStatus");
}

absl::StatusOr<v1::StopJobResponse> CoordinatorClient::StopJob(const v1::StopJobRequest& request) {
  return Call(&Stub::StopJob, request, "StopJob");
}

}  // namespace zeroshard
