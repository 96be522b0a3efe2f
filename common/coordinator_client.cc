#include "common/coordinator_client.h"

#include <chrono>

#include "common/grpc_status.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace zeroshard {

absl::StatusOr<std::unique_ptr<CoordinatorClient>> CoordinatorClient::Connect(
    const std::string& target, Options options) {
  if (target.empty()) return absl::InvalidArgumentError("coordinator address is empty");
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  auto channel =
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
  return std::make_unique<CoordinatorClient>(std::move(channel), options);
}

CoordinatorClient::CoordinatorClient(std::shared_ptr<grpc::Channel> channel, Options options)
    : options_(options), stub_(v1::Coordinator::NewStub(std::move(channel))) {}

void CoordinatorClient::SetDeadline(grpc::ClientContext* ctx, absl::Duration extra) const {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout + extra));
}

absl::StatusOr<v1::JoinResponse> CoordinatorClient::Join(const v1::JoinRequest& request) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::JoinResponse response;
  absl::Status s = FromGrpcStatus(stub_->Join(&ctx, request, &response), "Join");
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<v1::HeartbeatResponse> CoordinatorClient::Heartbeat(
    const v1::HeartbeatRequest& request) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::HeartbeatResponse response;
  absl::Status s = FromGrpcStatus(stub_->Heartbeat(&ctx, request, &response), "Heartbeat");
  if (!s.ok()) return s;
  return response;
}

absl::Status CoordinatorClient::Leave(const v1::LeaveRequest& request) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::LeaveResponse response;
  return FromGrpcStatus(stub_->Leave(&ctx, request, &response), "Leave");
}

absl::StatusOr<v1::ReportFailureResponse> CoordinatorClient::ReportFailure(
    const v1::ReportFailureRequest& request) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::ReportFailureResponse response;
  absl::Status s =
      FromGrpcStatus(stub_->ReportFailure(&ctx, request, &response), "ReportFailure");
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<v1::GenerationInfo> CoordinatorClient::GetGeneration(
    const v1::GetGenerationRequest& request) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::GenerationInfo response;
  absl::Status s =
      FromGrpcStatus(stub_->GetGeneration(&ctx, request, &response), "GetGeneration");
  if (!s.ok()) return s;
  return response;
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
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::KvSetResponse response;
  return FromGrpcStatus(stub_->KvSet(&ctx, request, &response), "KvSet");
}

absl::StatusOr<std::string> CoordinatorClient::KvGet(const v1::KvGetRequest& request) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::KvGetResponse response;
  absl::Status s = FromGrpcStatus(stub_->KvGet(&ctx, request, &response), "KvGet");
  if (!s.ok()) return s;
  return std::move(*response.mutable_value());
}

absl::Status CoordinatorClient::KvWait(const v1::KvWaitRequest& request) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, absl::Milliseconds(std::max<int64_t>(0, request.timeout_ms())));
  v1::KvWaitResponse response;
  return FromGrpcStatus(stub_->KvWait(&ctx, request, &response), "KvWait");
}

absl::StatusOr<int64_t> CoordinatorClient::KvAdd(const v1::KvAddRequest& request) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::KvAddResponse response;
  absl::Status s = FromGrpcStatus(stub_->KvAdd(&ctx, request, &response), "KvAdd");
  if (!s.ok()) return s;
  return response.value();
}

absl::Status CoordinatorClient::ReportStep(const v1::StepReport& request) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::ReportStepResponse response;
  return FromGrpcStatus(stub_->ReportStep(&ctx, request, &response), "ReportStep");
}

absl::StatusOr<v1::JobStatus> CoordinatorClient::GetJobStatus(
    const v1::GetJobStatusRequest& request) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  v1::JobStatus response;
  absl::Status s = FromGrpcStatus(stub_->GetJobStatus(&ctx, request, &response), "GetJobStatus");
  if (!s.ok()) return s;
  return response;
}

}  // namespace zeroshard
