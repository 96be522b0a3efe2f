#include "common/infra/listen_check.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace zeroshard {

absl::Status CheckCanListen(const std::string& flag, const std::string& host_port) {
  if (host_port.empty()) return absl::OkStatus();
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos || colon + 1 == host_port.size()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", host_port, ": not HOST:PORT"));
  }
  std::string host = host_port.substr(0, colon);
  const std::string port = host_port.substr(colon + 1);
  if (port == "0") return absl::OkStatus();
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  if (const int e =
          getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
      e != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", host_port, ": cannot resolve: ", gai_strerror(e)));
  }
  int error = 0;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    const bool bound = bind(fd, a->ai_addr, a->ai_addrlen) == 0;
    if (!bound) error = errno;
    close(fd);
    if (bound) {
      freeaddrinfo(found);
      return absl::OkStatus();
    }
  }
  freeaddrinfo(found);
  if (error == EADDRINUSE) {
    return absl::FailedPreconditionError(absl::StrCat(
        flag, " ", host_port, ": address already in use (is another coordinator running?)"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat(flag, " ", host_port, ": cannot listen: ", std::strerror(error)));
}

}  // namespace zeroshard
