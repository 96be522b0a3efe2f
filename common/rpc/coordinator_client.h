// A client for the coordinator's gRPC API (proto/zeroshard/v1/coordinator.proto)
// used by workers, the CLI and tests. Every call carries a deadline
// (Options::timeout; KvWait adds its own wait time to it) and returns
// absl::Status: gRPC errors keep their code (UNAVAILABLE when the
// coordinator is unreachable: retry; ABORTED for a stale
// generation: rejoin or move to the new generation; NOT_FOUND for an
// unknown member: Join again) and the message names the RPC.
//
// Thread safety: all methods may be called concurrently (gRPC stubs are
// thread-safe).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/rpc/rpc_security.h"
#include "common/rpc/unary_call.h"
#include "grpcpp/channel.h"
#include "zeroshard/v1/coordinator.grpc.pb.h"

namespace zeroshard {

struct CoordinatorClientOptions {
  absl::Duration timeout = absl::Seconds(10);  // Per-call deadline.
  int max_receive_message_bytes = 64 << 20;    // Generation infos of big plans.
  ClientSecurity security;                     // TLS files and token file (rpc_security.h).
  // The credentials calls carry; null = a new one from `security`'s token
  // file. A successful Join adds its member credential to it.
  std::shared_ptr<CallIdentity> identity;
};

class CoordinatorClient {
 public:
  using Options = CoordinatorClientOptions;

  // `target`: "HOST:PORT". Creates the channel; connects lazily, so an
  // unreachable coordinator shows up as UNAVAILABLE on the first call.
  // INVALID_ARGUMENT for an empty target or an unreadable TLS or token file.
  static absl::StatusOr<std::unique_ptr<CoordinatorClient>> Connect(const std::string& target,
                                                                    Options options = {});
  CoordinatorClient(std::shared_ptr<grpc::Channel> channel, Options options);

  absl::StatusOr<v1::JoinResponse> Join(const v1::JoinRequest& request);
  // Join, retried while it is refused because a live member holds
  // request.worker_id (IsWorkerIdHeld, rpc_security.h: e.g. a restarted
  // worker before its previous run's lease lapsed), with backoff (0.2 s
  // doubling to 2 s) for up to `wait`, logging one line to stdout on the
  // first refusal. Returns the last Join's result; CANCELLED as soon as
  // `stop` (null = never) returns true between tries.
  absl::StatusOr<v1::JoinResponse> JoinRetryingHeldId(const v1::JoinRequest& request,
                                                      absl::Duration wait,
                                                      const std::function<bool()>& stop);
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request);
  absl::Status Leave(const v1::LeaveRequest& request);
  absl::StatusOr<v1::ReportFailureResponse> ReportFailure(const v1::ReportFailureRequest& request);
  absl::StatusOr<v1::ReportHandoffResponse> ReportHandoff(const v1::ReportHandoffRequest& request);
  absl::StatusOr<v1::GenerationInfo> GetGeneration(const v1::GetGenerationRequest& request);

  // Reads the WatchGeneration stream for up to `duration`, calling
  // `on_update` for each GenerationInfo (the first is the current one).
  // Returns OK as soon as `on_update` returns false; DEADLINE_EXCEEDED when
  // `duration` passes first; the stream's error otherwise.
  absl::Status WatchGeneration(const v1::GetGenerationRequest& request, absl::Duration duration,
                               const std::function<bool(const v1::GenerationInfo&)>& on_update);

  // Rendezvous store of one generation. KvGet: NOT_FOUND if absent.
  absl::Status KvSet(const v1::KvSetRequest& request);
  absl::StatusOr<std::string> KvGet(const v1::KvGetRequest& request);
  // The call's deadline is request.timeout_ms + Options::timeout, so the
  // server's DEADLINE_EXCEEDED (naming the missing keys) arrives first.
  absl::Status KvWait(const v1::KvWaitRequest& request);
  absl::StatusOr<int64_t> KvAdd(const v1::KvAddRequest& request);

  absl::Status ReportStep(const v1::StepReport& request);
  absl::StatusOr<v1::JobStatus> GetJobStatus(const v1::GetJobStatusRequest& request);
  // An operator's stop (coordinator.proto StopJob); needs the admin role.
  absl::StatusOr<v1::StopJobResponse> StopJob(const v1::StopJobRequest& request);

  const Options& options() const { return options_; }
  // The channel (TLS and identity included), for other services' stubs on
  // the same port (the checkpoint service).
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

 private:
  // Now + Options::timeout + extra.
  absl::Time Deadline(absl::Duration extra = absl::ZeroDuration()) const;
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(UnaryMethod<v1::Coordinator::Stub, Request, Response> method,
                                const Request& request, const char* rpc_name,
                                absl::Duration extra = absl::ZeroDuration()) {
    return UnaryCall(stub_.get(), method, request, Deadline(extra), rpc_name);
  }

  Options options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
};

}  // namespace zeroshard
