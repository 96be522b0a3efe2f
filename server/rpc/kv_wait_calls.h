// KvWait on gRPC's asynchronous API: one thread drives a completion queue
// of the coordinator's server, and each parked wait is a small call object
// the core finishes (CoordinatorCore::StartKvWait), so no thread is held
// per wait and a client's cancel frees its slot at once (issue 16).
//
// [Note: poller starvation] Why not the callback API: in gRPC 1.51 (Debian)
// a server with callback methods gets the library's "nexting" threads,
// which sleep 100 ms after each idle second of polling; while they slept
// no thread polled the sockets, and every RPC of the server (heartbeats
// included) could stall ~100 ms once a second (p99 ~90 ms on an idle
// server, tests/server/kv/kv_wait_load_test.cc). A queue this thread blocks on
// polls like any sync worker.
//
// Each call is authorized by the AuthGate ("Coordinator/KvWait") before it
// parks; a refused or invalid call finishes at once with the gate's or the
// core's status.
//
// Thread safety: Start once, after the server is built; Shutdown once,
// after grpc::Server::Shutdown (the core's waits already ended). `service`,
// `core` and `gate` must outlive this.
#pragma once

#include <memory>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "grpcpp/completion_queue.h"
#include "server/core/coordinator_core.h"
#include "server/rpc/async_coordinator_service.h"
#include "server/rpc/auth_gate.h"
#include "zeroshard/v1/coordinator.grpc.pb.h"

namespace zeroshard::server {

class KvWaitCalls {
 public:
  KvWaitCalls(AsyncCoordinatorService* service, CoordinatorCore* core, const AuthGate* gate,
              std::unique_ptr<grpc::ServerCompletionQueue> queue);
  ~KvWaitCalls();  // Shutdown() if not done.
  KvWaitCalls(const KvWaitCalls&) = delete;
  KvWaitCalls& operator=(const KvWaitCalls&) = delete;

  void Start();
  void Shutdown();

  // Asks gRPC for the next KvWait call (no-op once shutting down).
  void RequestNext();

 private:
  void Run();

  AsyncCoordinatorService* const service_;
  CoordinatorCore* const core_;
  const AuthGate* const gate_;
  std::unique_ptr<grpc::ServerCompletionQueue> queue_;
  absl::Mutex mu_;  // Orders RequestNext against the queue's shutdown.
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace zeroshard::server
