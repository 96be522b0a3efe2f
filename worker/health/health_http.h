// The worker's probe endpoints (zeroshard-worker --health-listen
// HOST:PORT): GET /healthz answers 200 "ok" while WorkerHealth::Healthy
// holds and 503 "stale heartbeat" otherwise; GET /readyz answers 200
// "ready" while WorkerHealth::Ready holds, 503 "not ready" otherwise.
// Bodies are one text line; anything else is 404. One request per
// connection (Connection: close), answered one at a time: kubelet probes
// are a few per minute.
//
// Why not civetweb (which the coordinator uses): Debian's libcivetweb gives
// its threads a small fixed stack, and glibc carves each thread's static
// TLS out of it; the worker process loads oneDNN, OpenMP, NCCL and CUDA, whose
// TLS (~80 KiB) leaves too little, and civetweb's request thread overflows
// its stack (seen: SIGSEGV in libcivetweb on the first probe). This server
// runs on one std::thread with the default stack.
//
// Thread safety: one serving thread reads only WorkerHealth's atomics.
// Start and destroy from one owner thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/health/worker_health.h"

namespace zeroshard {

class HealthHttpServer {
 public:
  // `listen`: "HOST:PORT" (port 0 picks a free one). `max_heartbeat_age`:
  // see WorkerHealth::Healthy. INVALID_ARGUMENT for a malformed address,
  // FAILED_PRECONDITION naming `--health-listen` for a busy one,
  // UNAVAILABLE naming the socket error if it still cannot listen.
  static absl::StatusOr<std::unique_ptr<HealthHttpServer>> Start(const std::string& listen,
                                                                 const WorkerHealth* health,
                                                                 absl::Duration max_heartbeat_age);
  ~HealthHttpServer();  // Stops serving (within ~100 ms) and closes the socket.

  int port() const { return port_; }

 private:
  HealthHttpServer() = default;
  void Serve();

  int fd_ = -1;
  int port_ = 0;
  const WorkerHealth* health_ = nullptr;
  absl::Duration max_age_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace zeroshard
