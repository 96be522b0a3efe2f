#include "worker/health/health_http.h"

#include <exception>
#include <vector>

#include "CivetServer.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/listen_check.h"
#include "common/status_macros.h"

namespace zeroshard {
namespace {

// Answers 200 with `ok_body` while `check()` holds, 503 with `bad_body` otherwise.
class ProbeHandler : public CivetHandler {
 public:
  ProbeHandler(std::function<bool()> check, const char* ok_body, const char* bad_body)
      : check_(std::move(check)), ok_body_(ok_body), bad_body_(bad_body) {}

  bool handleGet(CivetServer*, mg_connection* conn) override {
    const bool ok = check_();
    const std::string body = ok ? ok_body_ : bad_body_;
    mg_printf(conn,
              "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
              "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
              ok ? "200 OK" : "503 Service Unavailable", body.size());
    mg_write(conn, body.data(), body.size());
    return true;
  }

 private:
  std::function<bool()> check_;
  std::string ok_body_;
  std::string bad_body_;
};

}  // namespace

class HealthHttpServer::Handlers {
 public:
  Handlers(const WorkerHealth* health, absl::Duration max_age)
      : healthz([health, max_age] { return health->Healthy(absl::Now(), max_age); }, "ok\n",
                "stale heartbeat\n"),
        readyz([health] { return health->Ready(); }, "ready\n", "not ready\n") {}
  ProbeHandler healthz;
  ProbeHandler readyz;
};

absl::StatusOr<std::unique_ptr<HealthHttpServer>> HealthHttpServer::Start(
    const std::string& listen, const WorkerHealth* health, absl::Duration max_heartbeat_age) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--health-listen \"", listen, "\" is not HOST:PORT"));
  }
  ZS_RETURN_IF_ERROR(CheckCanListen("--health-listen", listen));
  std::unique_ptr<HealthHttpServer> server(new HealthHttpServer());
  server->handlers_ = std::make_unique<Handlers>(health, max_heartbeat_age);
  const std::vector<std::string> options = {"listening_ports", listen, "num_threads", "2",
                                            "enable_keep_alive", "no"};
  try {
    server->server_ = std::make_unique<CivetServer>(options);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("--health-listen ", listen, ": ", e.what()));
  }
  server->server_->addHandler("/healthz", &server->handlers_->healthz);
  server->server_->addHandler("/readyz", &server->handlers_->readyz);
  const std::vector<int> ports = server->server_->getListeningPorts();
  if (ports.empty() || ports[0] <= 0) {
    return absl::UnavailableError(absl::StrCat("--health-listen ", listen, ": no port bound"));
  }
  server->port_ = ports[0];
  return server;
}

// civetweb's close() waits for its listener poll (up to 2 s); a worker
// exiting at the end of a job can afford that, so no wake-up trick here.
HealthHttpServer::~HealthHttpServer() {
  if (server_ != nullptr) server_->close();
}

}  // namespace zeroshard
