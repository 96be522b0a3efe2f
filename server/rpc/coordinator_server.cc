#include "server/rpc/coordinator_server.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/infra/process_metrics.h"
#include "common/rpc/rpc_security.h"
#include "common/rpc/tls_mirror.h"
#include "common/status_macros.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "server/rpc/auth_services.h"
#include "server/rpc/coordinator_service.h"
#include "server/rpc/kv_wait_calls.h"
#include "server/rpc/tls_reload_metrics.h"

namespace zeroshard {
namespace {

absl::Duration TickInterval(const CoordinatorOptions& o) {
  if (o.tick_interval > absl::ZeroDuration()) return o.tick_interval;
  absl::Duration d =
      std::min({o.core.heartbeat_interval, o.core.lease_timeout,
                o.core.settle > absl::ZeroDuration() ? o.core.settle : o.core.heartbeat_interval}) /
      4;
  return std::clamp(d, absl::Milliseconds(5), absl::Milliseconds(100));
}

// The server's own options (the core checks options.core).
absl::Status ValidateOptions(const CoordinatorOptions& o) {
  if (o.listen.empty()) return absl::InvalidArgumentError("listen is empty");
  if (o.max_receive_message_bytes < (1 << 20)) {
    return absl::InvalidArgumentError("max_receive_message_bytes is below 1 MiB");
  }
  if (o.heartbeat_stream_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("heartbeat_stream_threads = ", o.heartbeat_stream_threads, " is < 1"));
  }
  if (o.max_streams_per_caller < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_streams_per_caller = ", o.max_streams_per_caller, " is < 1"));
  }
  return absl::OkStatus();
}

MetricFamily* HeartbeatStreamGauge(MetricsRegistry& metrics) {
  MetricFamily* gauge = metrics.Gauge("zeroshard_heartbeat_streams",
                                      "Open HeartbeatStreams: workers heartbeating over a stream.");
  gauge->Set({}, 0);
  return gauge;
}

// Message sizes, keepalive and the limits on connections without a call.
void SetConnectionLimits(const CoordinatorOptions& options, grpc::ServerBuilder& builder) {
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  builder.SetMaxSendMessageSize(64 << 20);
  // [Note: streams of dead peers] A stream idle on a read (a HeartbeatStream
  // between beats, a WatchGeneration) never writes, so a crashed or cut-off
  // peer's connection would keep its stream's slot (StreamLimits) until
  // gRPC's default keepalive of 2 hours. Pings every 30 s, closed after 10 s
  // without an answer, free them in under a minute.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 30'000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10'000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);  // Also on quiet streams.
  // [Note: connections without a call]
  builder.AddChannelArgument(
      GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
      static_cast<int>(absl::ToInt64Milliseconds(options.handshake_timeout)));
  builder.AddChannelArgument(
      GRPC_ARG_MAX_CONNECTION_IDLE_MS,
      static_cast<int>(absl::ToInt64Milliseconds(options.max_connection_idle)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    const CoordinatorOptions& options, std::vector<grpc::Service*> extra_services) {
  ZS_RETURN_IF_ERROR(ValidateOptions(options));
  ZS_RETURN_IF_ERROR(server::CheckExposure(options.listen, options.security));
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                      MakeServerCredentials(options.security.tls));
  std::unique_ptr<CoordinatorServer> s(new CoordinatorServer(options));
  s->metrics_.AddCollectable(std::make_shared<ProcessMetrics>());  // process_* metrics.
  s->metrics_.AddCollectable(TlsReloadMetrics());                  // Refused certificate rotations.
  const Clock* clock = options.clock != nullptr ? options.clock : RealClock::Get();

  ZS_ASSIGN_OR_RETURN(std::unique_ptr<server::DurableState> durable,
                      server::DurableState::Open(options.state_dir));
  if (!options.state_dir.empty()) {
    ZS_ASSIGN_OR_RETURN(s->state_lock_, DirLock::Acquire(options.state_dir, kStateLockName));
  }
  server::CoreOptions core_options = options.core;
  core_options.insecure = options.security.insecure;
  ZS_ASSIGN_OR_RETURN(s->core_, server::CoordinatorCore::Create(core_options, std::move(durable),
                                                                clock, &s->metrics_));
  server::CoordinatorCore* core = s->core_.get();
  s->watchdog_ = std::make_unique<server::HeartbeatWatchdog>(options.core.lease_timeout / 4,
                                                             absl::Seconds(10));
  ZS_RETURN_IF_ERROR(s->StartGrpc(extra_services, credentials));

  if (!options.metrics_listen.empty()) {
    const absl::Duration stall = std::max(absl::Seconds(5), TickInterval(options) * 20);
    CoordinatorServer* raw = s.get();
    server::HttpProbes probes{// A stalled core, or a TLS certificate clients cannot accept.
                              [core, clock, stall]() -> std::string {
                                if (clock->Now() - core->last_tick() >= stall) return "stalled";
                                return TlsServingProblem();
                              },
                              [raw] {
                                absl::MutexLock lock(&raw->shutdown_mu_);
                                return !raw->shut_down_ && raw->watchdog_->Ready();
                              }};
    absl::StatusOr<std::unique_ptr<server::MetricsHttpServer>> http =
        server::MetricsHttpServer::Start(options.metrics_listen, &s->metrics_, std::move(probes));
    if (!http.ok()) {
      s->Shutdown();
      return http.status();
    }
    s->http_ = std::move(*http);
    s->metrics_port_ = s->http_->port();
  }
  s->ticker_ =
      std::thread([raw = s.get(), interval = TickInterval(options)] { raw->TickLoop(interval); });
  return s;
}

absl::Status CoordinatorServer::StartGrpc(const std::vector<grpc::Service*>& extra_services,
                                          std::shared_ptr<grpc::ServerCredentials> credentials) {
  server::CoordinatorCore* core = core_.get();
  ZS_ASSIGN_OR_RETURN(gate_, server::AuthGate::Create(
                                 options_.security.token_file,
                                 [core](uint64_t id) { return core->IsLiveMember(id); },
                                 options_.security.bind_worker_identity));
  StreamLimits* streams = options_.stream_limits;
  if (streams == nullptr) {
    own_streams_ = std::make_unique<StreamLimits>(
        options_.max_streams_per_caller,
        std::max(options_.max_streams, options_.max_streams_per_caller));
    streams = own_streams_.get();
  }
  auto service = std::make_unique<server::CoordinatorService>(core, streams, watchdog_.get());
  guarded_service_ = server::GuardCoordinatorService(service.get(), gate_.get(), core);
  service_ = std::move(service);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.listen, credentials, &port_);
  SetConnectionLimits(options_, builder);
  builder.RegisterService(guarded_service_.get());
  // KvWait on the asynchronous API ([Note: poller starvation]).
  kv_waits_ = std::make_unique<server::KvWaitCalls>(guarded_service_.get(), core, gate_.get(),
                                                    builder.AddCompletionQueue());
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> beat_queues;
  for (int i = 0; i < options_.heartbeat_stream_threads; ++i) {
    beat_queues.push_back(builder.AddCompletionQueue());
  }
  heartbeat_streams_ = std::make_unique<server::HeartbeatStreams>(
      server::HeartbeatStreamsDeps{guarded_service_.get(), core, gate_.get(), streams,
                                   watchdog_.get(), HeartbeatStreamGauge(metrics_)},
      std::move(beat_queues));
  if (options_.checkpoint_service != nullptr) {
    guarded_checkpoints_ =
        server::GuardCheckpointService(options_.checkpoint_service, gate_.get(), core);
    builder.RegisterService(guarded_checkpoints_.get());
  }
  for (grpc::Service* extra : extra_services) builder.RegisterService(extra);
  grpc_server_ = builder.BuildAndStart();
  if (grpc_server_ == nullptr || port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve gRPC on ", options_.listen));
  }
  kv_waits_->Start();
  heartbeat_streams_->Start();
  return absl::OkStatus();
}

void CoordinatorServer::TickLoop(absl::Duration interval) {
  while (!stop_ticker_.WaitForNotificationWithTimeout(interval)) core_->Tick();
}

std::string CoordinatorServer::address() const {
  std::string host = options_.listen.substr(0, options_.listen.rfind(':'));
  if (host.empty() || host == "0.0.0.0" || host == "[::]") host = "127.0.0.1";
  return absl::StrCat(host, ":", port_);
}

void CoordinatorServer::Shutdown() {
  {
    absl::MutexLock lock(&shutdown_mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  // Waiters first, so in-flight KvWait/WatchGeneration calls return and
  // the gRPC shutdown below does not wait on them.
  if (core_ != nullptr) core_->Shutdown();
  if (grpc_server_ != nullptr) {
    grpc_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
  // After the server's, as gRPC requires.
  if (kv_waits_ != nullptr) kv_waits_->Shutdown();
  if (heartbeat_streams_ != nullptr) heartbeat_streams_->Shutdown();
  if (http_ != nullptr) http_->Stop();
  if (!stop_ticker_.HasBeenNotified()) stop_ticker_.Notify();
  if (ticker_.joinable()) ticker_.join();
}

CoordinatorServer::~CoordinatorServer() { Shutdown(); }

}  // namespace zeroshard
