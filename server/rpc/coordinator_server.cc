#include "server/rpc/coordinator_server.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/process_metrics.h"
#include "common/status_macros.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "server/rpc/coordinator_service.h"

namespace zeroshard {
namespace {

absl::Duration TickInterval(const CoordinatorOptions& o) {
  if (o.tick_interval > absl::ZeroDuration()) return o.tick_interval;
  absl::Duration d = std::min({o.core.heartbeat_interval, o.core.lease_timeout,
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
  if (o.max_streams_per_caller < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_streams_per_caller = ", o.max_streams_per_caller, " is < 1"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    const CoordinatorOptions& options, std::vector<grpc::Service*> extra_services) {
  ZS_RETURN_IF_ERROR(ValidateOptions(options));
  std::unique_ptr<CoordinatorServer> s(new CoordinatorServer(options));
  s->metrics_.AddCollectable(std::make_shared<ProcessMetrics>());  // process_* metrics.
  const Clock* clock = options.clock != nullptr ? options.clock : RealClock::Get();

  ZS_ASSIGN_OR_RETURN(std::unique_ptr<server::DurableState> durable,
                      server::DurableState::Open(options.state_dir));
  if (!options.state_dir.empty()) {
    ZS_ASSIGN_OR_RETURN(s->state_lock_,
                        DirLock::Acquire(options.state_dir, kStateLockName));
  }
  ZS_ASSIGN_OR_RETURN(s->core_, server::CoordinatorCore::Create(options.core, std::move(durable),
                                                                clock, &s->metrics_));

  s->watchdog_ = std::make_unique<server::HeartbeatWatchdog>(options.core.lease_timeout / 4,
                                                            absl::Seconds(10));
  StreamLimits* streams = options.stream_limits;
  if (streams == nullptr) {
    s->own_streams_ = std::make_unique<StreamLimits>(options.max_streams_per_caller);
    streams = s->own_streams_.get();
  }
  s->service_ = std::make_unique<server::CoordinatorService>(s->core_.get(), streams,
                                                             s->watchdog_.get());
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &s->port_);
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  builder.SetMaxSendMessageSize(64 << 20);
  builder.RegisterService(s->service_.get());
  for (grpc::Service* extra : extra_services) builder.RegisterService(extra);
  s->grpc_server_ = builder.BuildAndStart();
  if (s->grpc_server_ == nullptr || s->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve gRPC on ", options.listen));
  }

  if (!options.metrics_listen.empty()) {
    server::CoordinatorCore* core = s->core_.get();
    const absl::Duration stall = std::max(absl::Seconds(5), TickInterval(options) * 20);
    CoordinatorServer* raw = s.get();
    server::HttpProbes probes{
        [core, clock, stall] { return clock->Now() - core->last_tick() < stall; },
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
  s->ticker_ = std::thread([raw = s.get(), interval = TickInterval(options)] {
    raw->TickLoop(interval);
  });
  return s;
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
  if (http_ != nullptr) http_->Stop();
  if (!stop_ticker_.HasBeenNotified()) stop_ticker_.Notify();
  if (ticker_.joinable()) ticker_.join();
}

CoordinatorServer::~CoordinatorServer() { Shutdown(); }

}  // namespace zeroshard
