// The coordinator's HTTP endpoints (civetweb): GET /metrics (Prometheus
// text exposition 0.0.4: MetricsRegistry::Render, i.e. prometheus-cpp's
// TextSerializer over its registry), GET /healthz (200 while
// the coordinator's state machine keeps ticking, 503 if it has stalled) and
// GET /readyz (200 while serving with heartbeats on time, 503 once shutting
// down or while heartbeats are slow: server/rpc/heartbeat_watchdog.h). Kubernetes
// probes and Prometheus scrapes use these. civetweb serves all three on the
// one metrics port (9464 by default) rather than prometheus::Exposer, which
// owns its own port and has no place for the probes.
//
// Thread safety: civetweb serves requests on its own threads; the callbacks
// it calls are thread-safe. Start/Stop from one owner thread.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "common/infra/metrics.h"

class CivetServer;

namespace zeroshard::server {

struct HttpProbes {
  // /healthz: "" when healthy (200 "ok"), else why not (503 and the reason).
  std::function<std::string()> unhealthy;
  std::function<bool()> ready;  // /readyz
};

class MetricsHttpServer {
 public:
  // civetweb's worker threads, and how long a connection may take to send
  // its request (slow clients must not starve /healthz; metrics_http.cc).
  static constexpr int kThreads = 32;
  static constexpr int kRequestTimeoutMs = 2000;
  // `listen`: "HOST:PORT" (port 0 picks a free one). INVALID_ARGUMENT for a
  // malformed address; UNAVAILABLE if civetweb cannot bind it.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& listen,
                                                                  const MetricsRegistry* metrics,
                                                                  HttpProbes probes);
  ~MetricsHttpServer();
  int port() const { return port_; }
  // Stops serving (idempotent).
  void Stop();

 private:
  class Handlers;
  MetricsHttpServer() = default;
  std::unique_ptr<Handlers> handlers_;
  std::unique_ptr<CivetServer> server_;
  int port_ = 0;
  std::string host_;
};

}  // namespace zeroshard::server
