// HeartbeatStream (coordinator.proto) on gRPC's asynchronous API: each open
// stream is a small call object, its events handled by one of `queues`
// threads (a stream stays on the queue it was accepted on, so its events
// never run concurrently), and no thread is held per stream. Why not the
// callback API: [Note: poller starvation] in kv_wait_calls.h.
//
// How a stream runs: accepted -> stream slot (StreamLimits, per caller) ->
// read a request (raw bytes, parsed here: INVALID_ARGUMENT if malformed)
// -> authorize (AuthGate, "Coordinator/HeartbeatStream",
// once per member_id a stream names: its metadata does not change) ->
// CoordinatorCore::Heartbeat (timed by the HeartbeatWatchdog, as unary
// heartbeats are) -> write the response -> read the next. The first refused
// request finishes the stream with the status a unary Heartbeat would get;
// a client's half-close finishes it with OK; a failed write or a cancel
// ends it.
//
// Thread safety: Start once, after the server is built; Shutdown once,
// after grpc::Server::Shutdown (the server cancels open streams).
// `service`, `core`, `gate`, `streams` and `watchdog` (may be null) must
// outlive this.
#pragma once

#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/infra/metrics.h"
#include "common/rpc/stream_limits.h"
#include "grpcpp/completion_queue.h"
#include "server/core/coordinator_core.h"
#include "server/rpc/async_coordinator_service.h"
#include "server/rpc/auth_gate.h"
#include "server/rpc/heartbeat_watchdog.h"

namespace zeroshard::server {

struct HeartbeatStreamsDeps {
  AsyncCoordinatorService* service;
  CoordinatorCore* core;
  const AuthGate* gate;
  StreamLimits* streams;        // Null = no per-caller limit.
  HeartbeatWatchdog* watchdog;  // Null = not timed.
  MetricFamily* open_streams;   // Gauge of open streams; null = none.
};

class HeartbeatStreams {
 public:
  // One thread per queue (at least one; builder.AddCompletionQueue()).
  HeartbeatStreams(HeartbeatStreamsDeps deps,
                   std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues);
  ~HeartbeatStreams();  // Shutdown() if not done.
  HeartbeatStreams(const HeartbeatStreams&) = delete;
  HeartbeatStreams& operator=(const HeartbeatStreams&) = delete;

  void Start();
  void Shutdown();

  // Asks gRPC for the next stream on queue `q` (no-op once shutting down).
  void RequestNext(size_t q);
  const HeartbeatStreamsDeps& deps() const { return deps_; }

  // Runs `start_op` (which starts one operation on a stream of this
  // object's queues) unless the queues are shutting down, and says whether
  // it ran. No operation may start on a completion queue after its
  // Shutdown (gRPC aborts: "assertion failed: grpc_cq_begin_op"), and a
  // cancelled stream's last read still comes back after the server's
  // shutdown, so every handler starts its operations through this.
  template <typename StartOp>
  bool StartUnlessShutDown(StartOp start_op) {
    absl::ReaderMutexLock lock(&mu_);
    if (shut_down_) return false;
    start_op();
    return true;
  }

 private:
  void Run(size_t q);

  const HeartbeatStreamsDeps deps_;
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues_;
  absl::Mutex mu_;  // Orders RequestNext and new operations against the queues' shutdown.
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace zeroshard::server
