// The coordinator as a library: what zeroshard-coordinator runs and what
// `zeroshard launch` embeds. Start() loads the state dir, serves the gRPC
// Coordinator service (plus any extra services, e.g. the checkpoint
// service) on `listen` and the HTTP endpoints (/metrics, /healthz, /readyz)
// on `metrics_listen`, and runs a ticker thread that applies the clock to
// the state machine (leases, settle, generations).
//
// Thread safety: every method is thread-safe. Shutdown() is idempotent and
// also runs from the destructor; after it, port() and the accessors still
// answer.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/infra/dir_lock.h"
#include "common/infra/metrics.h"
#include "common/rpc/stream_limits.h"
#include "grpcpp/impl/codegen/service_type.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "server/checkpoint/framed_checkpoint_service.h"
#include "server/core/coordinator_core.h"
#include "server/http/metrics_http.h"
#include "server/rpc/auth_gate.h"
#include "server/rpc/heartbeat_streams.h"
#include "server/rpc/heartbeat_watchdog.h"
#include "server/rpc/kv_wait_calls.h"
#include "server/state/durable_state.h"

namespace zeroshard {

struct CoordinatorOptions {
  std::string listen = "127.0.0.1:0";          // gRPC HOST:PORT; port 0 picks one.
  std::string metrics_listen = "127.0.0.1:0";  // HTTP HOST:PORT; "" = no HTTP server.
  std::string state_dir;                       // "" = nothing persisted.
  // Membership, plan and job settings of the state machine: job_id,
  // min/max_workers, settle, heartbeat_interval, lease_timeout, alignment,
  // job_config_json (opaque JSON handed to workers; "" = the persisted one).
  server::CoreOptions core;
  std::string checkpoint_dir;  // For the checkpoint service; the core ignores it.
  // With a checkpoint dir: ranks on this host may read checkpoints from
  // their files themselves (server/checkpoint/local_read_server.h);
  // CoordinatorStack starts that socket. --local-reads.
  bool local_reads = true;
  // Largest request gRPC accepts, bytes (checkpoint chunks stay below this).
  int max_receive_message_bytes = 16 << 20;
  // How often the ticker applies the clock; 0 = min(heartbeat_interval,
  // settle, lease_timeout) / 4, clamped to [5 ms, 100 ms].
  absl::Duration tick_interval = absl::ZeroDuration();
  const Clock* clock = nullptr;  // nullptr = RealClock. Must outlive the server.
  // TLS, tokens and --insecure (server/rpc/auth_gate.h); the default is
  // plaintext without tokens, which only a loopback `listen` allows.
  server::ServerSecurity security;
  // The checkpoint service, served on the same port behind the same
  // AuthGate as the Coordinator service; null = none. Must outlive the server.
  server::FramedCheckpointService* checkpoint_service = nullptr;
  // Open streams (WatchGeneration, HeartbeatStream, UploadShard,
  // DownloadRange) one caller (peer host) may hold; RESOURCE_EXHAUSTED
  // beyond (common/rpc/stream_limits.h).
  int max_streams_per_caller = 256;
  // Open streams of all callers together (--max-streams): hosts cannot add
  // up past it.
  int max_streams = 4096;
  // [Note: connections without a call] A connection must finish its TLS
  // (or plaintext HTTP/2) handshake within `handshake_timeout`, and one
  // that carries no call for `max_connection_idle` is closed (its client
  // reconnects when it next calls), so idle or half-open connections from
  // anyone, credentials or not, cannot pile up and hold descriptors.
  absl::Duration handshake_timeout = absl::Seconds(10);
  absl::Duration max_connection_idle = absl::Minutes(5);
  // Threads serving HeartbeatStream calls, each driving one completion
  // queue of them (heartbeat_streams.h); >= 1.
  int heartbeat_stream_threads = 2;
  // The count those streams share: CoordinatorStack passes the checkpoint
  // service's. nullptr = the server's own, of max_streams_per_caller. Must
  // outlive the server.
  StreamLimits* stream_limits = nullptr;
};

class CoordinatorServer {
 public:
  // The lock file a serving coordinator holds in its state dir (DirLock).
  static constexpr const char* kStateLockName = ".coordinator-state.lock";

  // Errors: INVALID_ARGUMENT for a bad option (named), a bad TLS or token
  // file, or a non-loopback `listen` without TLS and tokens (CheckExposure);
  // FAILED_PRECONDITION
  // if the state dir belongs to another job; UNAVAILABLE if an address
  // cannot be bound; I/O errors from the state dir. `extra_services` must
  // outlive the server; they are served without the AuthGate (tests).
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(
      const CoordinatorOptions& options, std::vector<grpc::Service*> extra_services = {});
  ~CoordinatorServer();
  CoordinatorServer(const CoordinatorServer&) = delete;
  CoordinatorServer& operator=(const CoordinatorServer&) = delete;

  int port() const { return port_; }                  // Bound gRPC port.
  int metrics_port() const { return metrics_port_; }  // Bound HTTP port, 0 if none.
  // "HOST:PORT" a client on this machine can dial.
  std::string address() const;
  const CoordinatorOptions& options() const { return options_; }
  const std::string& state_dir() const { return options_.state_dir; }

  // For the checkpoint service and launch: the running generation and its
  // members (core()->generation(), core()->RankedMembers(), ...), the
  // job's units, and durable state (core()->durable()->RecordCheckpoint).
  server::CoordinatorCore* core() { return core_.get(); }
  server::DurableState* durable_state() { return core_->durable(); }
  MetricsRegistry* metrics() { return &metrics_; }
  const server::AuthGate* gate() const { return gate_.get(); }  // Null before Start.
  uint64_t generation() const { return core_->generation(); }

  // Stops accepting calls, ends waits (KvWait, WatchGeneration) with
  // UNAVAILABLE, and joins threads; returns within ~2 s.
  void Shutdown();

 private:
  explicit CoordinatorServer(const CoordinatorOptions& options) : options_(options) {}
  std::unique_ptr<DirLock> state_lock_;  // One coordinator per state dir.
  void TickLoop(absl::Duration interval);
  // The AuthGate, the guarded services and the gRPC server on options_.listen.
  absl::Status StartGrpc(const std::vector<grpc::Service*>& extra_services,
                         std::shared_ptr<grpc::ServerCredentials> credentials);

  const CoordinatorOptions options_;
  MetricsRegistry metrics_;
  std::unique_ptr<server::CoordinatorCore> core_;
  // /readyz is false while heartbeats take longer than lease_timeout / 4.
  std::unique_ptr<server::HeartbeatWatchdog> watchdog_;
  std::unique_ptr<StreamLimits> own_streams_;  // When options.stream_limits is null.
  std::unique_ptr<grpc::Service> service_;
  std::unique_ptr<server::AuthGate> gate_;
  std::unique_ptr<server::AsyncCoordinatorService> guarded_service_;  // service_ behind gate_.
  std::unique_ptr<grpc::Service> guarded_checkpoints_;  // options.checkpoint_service behind gate_.
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<server::KvWaitCalls> kv_waits_;  // Its queue outlives no server call.
  std::unique_ptr<server::HeartbeatStreams> heartbeat_streams_;  // Likewise.
  std::unique_ptr<server::MetricsHttpServer> http_;
  std::thread ticker_;
  absl::Notification stop_ticker_;
  absl::Mutex shutdown_mu_;
  bool shut_down_ ABSL_GUARDED_BY(shutdown_mu_) = false;
  int port_ = 0;
  int metrics_port_ = 0;
};

}  // namespace zeroshard
