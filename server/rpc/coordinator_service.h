// The gRPC Coordinator service: a thin adapter that hands each request to
// CoordinatorCore and turns its absl::Status into grpc::Status
// (common/rpc/grpc_status.h). WatchGeneration streams a GenerationInfo at once
// and then after every generation change, until the client cancels, its
// deadline passes, or the server shuts down.
//
// KvWait is not here: it runs on gRPC's asynchronous API (kv_wait_calls.h),
// with no thread per parked wait.
//
// Thread safety: called concurrently by gRPC's sync server threads.
#pragma once

#include "common/rpc/stream_limits.h"
#include "server/core/coordinator_core.h"
#include "server/rpc/heartbeat_watchdog.h"
#include "zeroshard/v1/coordinator.grpc.pb.h"

namespace zeroshard::server {

class CoordinatorService final : public v1::Coordinator::Service {
 public:
  // `streams` (may be null: no limit) counts open WatchGeneration streams
  // per caller; `watchdog` (may be null) times every Heartbeat. All must
  // outlive this.
  CoordinatorService(CoordinatorCore* core, StreamLimits* streams,
                     HeartbeatWatchdog* watchdog = nullptr)
      : core_(core), streams_(streams), watchdog_(watchdog) {}

  grpc::Status Join(grpc::ServerContext*, const v1::JoinRequest* request,
                    v1::JoinResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext*, const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  grpc::Status Leave(grpc::ServerContext*, const v1::LeaveRequest* request,
                     v1::LeaveResponse* response) override;
  grpc::Status ReportFailure(grpc::ServerContext*, const v1::ReportFailureRequest* request,
                             v1::ReportFailureResponse* response) override;
  grpc::Status ReportHandoff(grpc::ServerContext*, const v1::ReportHandoffRequest* request,
                             v1::ReportHandoffResponse* response) override;
  grpc::Status GetGeneration(grpc::ServerContext*, const v1::GetGenerationRequest* request,
                             v1::GenerationInfo* response) override;
  grpc::Status WatchGeneration(grpc::ServerContext* context,
                               const v1::GetGenerationRequest* request,
                               grpc::ServerWriter<v1::GenerationInfo>* writer) override;
  grpc::Status KvSet(grpc::ServerContext*, const v1::KvSetRequest* request,
                     v1::KvSetResponse* response) override;
  grpc::Status KvGet(grpc::ServerContext*, const v1::KvGetRequest* request,
                     v1::KvGetResponse* response) override;
  grpc::Status KvAdd(grpc::ServerContext*, const v1::KvAddRequest* request,
                     v1::KvAddResponse* response) override;
  grpc::Status ReportStep(grpc::ServerContext*, const v1::StepReport* request,
                          v1::ReportStepResponse* response) override;
  grpc::Status GetJobStatus(grpc::ServerContext*, const v1::GetJobStatusRequest* request,
                            v1::JobStatus* response) override;
  grpc::Status StopJob(grpc::ServerContext*, const v1::StopJobRequest* request,
                       v1::StopJobResponse* response) override;

 private:
  CoordinatorCore* core_;
  StreamLimits* streams_;
  HeartbeatWatchdog* watchdog_;
};

}  // namespace zeroshard::server
