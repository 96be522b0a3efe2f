// The worker's probe endpoints over civetweb (zeroshard-worker
// --health-listen HOST:PORT): GET /healthz answers 200 "ok" while
// WorkerHealth::Healthy holds and 503 "stale heartbeat" otherwise; GET
// /readyz answers 200 "ready" while WorkerHealth::Ready holds, 503 "not
// ready" otherwise. Bodies are one text line. Nothing else is served (404).
//
// Thread safety: civetweb answers on its own threads, reading only the
// atomics of WorkerHealth. Start and destroy from one owner thread.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/health/worker_health.h"

class CivetServer;

namespace zeroshard {

class HealthHttpServer {
 public:
  // `listen`: "HOST:PORT" (port 0 picks a free one). `max_heartbeat_age`:
  // see WorkerHealth::Healthy. INVALID_ARGUMENT for a malformed address,
  // FAILED_PRECONDITION naming `--health-listen` for a busy one,
  // UNAVAILABLE if civetweb still cannot serve it.
  static absl::StatusOr<std::unique_ptr<HealthHttpServer>> Start(
      const std::string& listen, const WorkerHealth* health, absl::Duration max_heartbeat_age);
  ~HealthHttpServer();  // Stops serving.

  int port() const { return port_; }

 private:
  class Handlers;
  HealthHttpServer() = default;
  std::unique_ptr<Handlers> handlers_;
  std::unique_ptr<CivetServer> server_;
  int port_ = 0;
};

}  // namespace zeroshard
