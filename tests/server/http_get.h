// A minimal blocking HTTP/1.1 GET over loopback for tests (the coordinator's
// /metrics, /healthz, /readyz). Returns the status code and body; code -1
// on a connection error. Bounded by a 5 s socket timeout.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace zeroshard::server::testing {

struct HttpResponse {
  int code = -1;
  std::string body;
};

inline HttpResponse HttpGet(int port, const std::string& path) {
  HttpResponse out;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return out;
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return out;
  }
  const std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (::write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return out;
  }
  std::string raw;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) raw.append(buf, static_cast<size_t>(n));
  ::close(fd);
  const size_t sp = raw.find(' ');
  const size_t body = raw.find("\r\n\r\n");
  if (sp == std::string::npos || body == std::string::npos) return out;
  out.code = std::stoi(raw.substr(sp + 1, 3));
  out.body = raw.substr(body + 4);
  return out;
}

}  // namespace zeroshard::server::testing
