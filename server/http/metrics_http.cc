#include "server/http/metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <exception>
#include <thread>

#include "CivetServer.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace zeroshard::server {
namespace {

void Respond(mg_connection* conn, int code, const char* content_type, const std::string& body) {
  mg_printf(conn,
            "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
            "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
            code, code == 200 ? "OK" : "Service Unavailable", content_type, body.size());
  mg_write(conn, body.data(), body.size());
}

class TextHandler : public CivetHandler {
 public:
  TextHandler(std::function<int()> code, std::function<std::string()> body,
              const char* content_type)
      : code_(std::move(code)), body_(std::move(body)), content_type_(content_type) {}
  bool handleGet(CivetServer*, mg_connection* conn) override {
    const int code = code_();
    Respond(conn, code, content_type_, body_());
    return true;
  }

 private:
  std::function<int()> code_;
  std::function<std::string()> body_;
  const char* content_type_;
};

// Opens and closes one TCP connection to host:port (best effort).
void Poke(const std::string& host, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1 || addr.sin_addr.s_addr == 0) {
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  (void)::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::close(fd);
}

}  // namespace

class MetricsHttpServer::Handlers {
 public:
  Handlers(const MetricsRegistry* metrics, HttpProbes probes)
      : probes_(std::move(probes)),
        metrics_([] { return 200; }, [metrics] { return metrics->Render(); },
                 "text/plain; version=0.0.4; charset=utf-8"),
        healthz_([this] { return probes_.unhealthy().empty() ? 200 : 503; },
                 [this] {
                   const std::string why = probes_.unhealthy();
                   return why.empty() ? std::string("ok\n") : why + "\n";
                 },
                 "text/plain"),
        readyz_([this] { return probes_.ready() ? 200 : 503; },
                [this] { return std::string(probes_.ready() ? "ready\n" : "not ready\n"); },
                "text/plain") {}
  HttpProbes probes_;
  TextHandler metrics_;
  TextHandler healthz_;
  TextHandler readyz_;
};

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& listen, const MetricsRegistry* metrics, HttpProbes probes) {
  const size_t colon = listen.rfind(':');
  int port = -1;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics listen address \"", listen, "\" is not HOST:PORT"));
  }
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer());
  server->handlers_ = std::make_unique<Handlers>(metrics, std::move(probes));
  // Each connection holds a thread until its request is whole, so slow or
  // unfinished requests (slowloris) must not be able to take them all: the
  // liveness probe would fail and Kubernetes restart a healthy process. A
  // scrape or probe sends its request in milliseconds; one that has not
  // after kRequestTimeoutMs is dropped, and kThreads covers many at once.
  const std::vector<std::string> options = {"listening_ports",    listen,
                                            "num_threads",        std::to_string(kThreads),
                                            "request_timeout_ms", std::to_string(kRequestTimeoutMs),
                                            "enable_keep_alive",  "no"};
  try {
    server->server_ = std::make_unique<CivetServer>(options);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", listen, ": ", e.what()));
  }
  server->server_->addHandler("/metrics", &server->handlers_->metrics_);
  server->server_->addHandler("/healthz", &server->handlers_->healthz_);
  server->server_->addHandler("/readyz", &server->handlers_->readyz_);
  const std::vector<int> ports = server->server_->getListeningPorts();
  if (ports.empty() || ports[0] <= 0) {
    server->Stop();
    return absl::UnavailableError(absl::StrCat("metrics server on ", listen, " has no port"));
  }
  server->port_ = ports[0];
  server->host_ = listen.substr(0, colon);
  return server;
}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

void MetricsHttpServer::Stop() {
  if (server_ == nullptr) return;
  // civetweb's listener polls with a 2 s quantum and only sees the stop
  // flag when the poll returns; a connection makes it return at once, so
  // shutdown takes milliseconds instead of up to 2 s.
  std::atomic<bool> closed{false};
  std::thread poker([this, &closed] {
    while (!closed.load()) {
      Poke(host_, port_);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  server_->close();
  closed.store(true);
  poker.join();
  server_.reset();
}

}  // namespace zeroshard::server
