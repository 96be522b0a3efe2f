#include "worker/health/health_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/infra/listen_check.h"
#include "common/status_macros.h"

namespace zeroshard {
namespace {

constexpr int kPollMs = 100;             // How soon Stop is noticed.
constexpr int kRequestTimeoutMs = 2000;  // A probe client gets this long to send its request.
constexpr size_t kMaxRequestBytes = 4096;

// Reads up to the end of the request head ("\r\n\r\n"), kMaxRequestBytes or
// the timeout; returns what arrived.
std::string ReadRequestHead(int fd) {
  std::string head;
  char buf[1024];
  const absl::Time deadline = absl::Now() + absl::Milliseconds(kRequestTimeoutMs);
  while (head.size() < kMaxRequestBytes && !absl::StrContains(head, "\r\n\r\n")) {
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    pollfd p{fd, POLLIN, 0};
    if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    head.append(buf, static_cast<size_t>(n));
  }
  return head;
}

void Reply(int fd, int code, const std::string& body) {
  const char* reason = code == 200 ? "OK" : code == 404 ? "Not Found" : "Service Unavailable";
  const std::string response =
      absl::StrCat("HTTP/1.1 ", code, " ", reason, "\r\nContent-Type: text/plain\r\n",
                   "Content-Length: ", body.size(), "\r\nCache-Control: no-store\r\n",
                   "Connection: close\r\n\r\n", body);
  size_t sent = 0;
  while (sent < response.size()) {
    const ssize_t n = ::send(fd, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

}  // namespace

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
  const std::string host = listen.substr(0, colon);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--health-listen ", listen, ": ", host, " is not an IPv4 address"));
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  if (fd < 0 || ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 16) != 0) {
    const std::string error = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return absl::UnavailableError(absl::StrCat("--health-listen ", listen, ": ", error));
  }
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  std::unique_ptr<HealthHttpServer> server(new HealthHttpServer());
  server->fd_ = fd;
  server->port_ = ntohs(addr.sin_port);
  server->health_ = health;
  server->max_age_ = max_heartbeat_age;
  server->thread_ = std::thread([s = server.get()] { s->Serve(); });
  return server;
}

void HealthHttpServer::Serve() {
  while (!stop_.load()) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, kPollMs) <= 0) continue;
    const int conn = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    const std::string head = ReadRequestHead(conn);
    // "GET /healthz HTTP/1.1": the path is the second word of the first line.
    const size_t sp1 = head.find(' ');
    const size_t sp2 = head.find(' ', sp1 + 1);
    const std::string path = sp1 == std::string::npos || sp2 == std::string::npos
                                 ? ""
                                 : head.substr(sp1 + 1, sp2 - sp1 - 1);
    if (!absl::StartsWith(head, "GET ")) {
      Reply(conn, 404, "not found\n");
    } else if (path == "/healthz") {
      const bool ok = health_->Healthy(absl::Now(), max_age_);
      Reply(conn, ok ? 200 : 503, ok ? "ok\n" : "stale heartbeat\n");
    } else if (path == "/readyz") {
      const bool ok = health_->Ready();
      Reply(conn, ok ? 200 : 503, ok ? "ready\n" : "not ready\n");
    } else {
      Reply(conn, 404, "not found\n");
    }
    ::close(conn);
  }
}

HealthHttpServer::~HealthHttpServer() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace zeroshard
