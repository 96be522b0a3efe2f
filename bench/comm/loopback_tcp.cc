#include "bench/comm/loopback_tcp.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

namespace zeroshard {
namespace {

constexpr int kBufferBytes = 4 << 20;

void Widen(int fd) {
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &kBufferBytes, sizeof(kBufferBytes));
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &kBufferBytes, sizeof(kBufferBytes));
}

// A connected pair on 127.0.0.1: {writer, reader}; {-1, -1} on failure.
std::pair<int, int> Connect() {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (listener < 0 || bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, 1) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::perror("loopback listen");
    return {-1, -1};
  }
  const int writer = socket(AF_INET, SOCK_STREAM, 0);
  Widen(writer);
  if (connect(writer, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::perror("loopback connect");
    return {-1, -1};
  }
  const int reader = accept(listener, nullptr, nullptr);
  close(listener);
  Widen(reader);
  return {writer, reader};
}

double OneTransfer(int writer, int reader, size_t bytes) {
  std::vector<char> out(std::min<size_t>(bytes, kBufferBytes), 1), in(kBufferBytes);
  const auto start = std::chrono::steady_clock::now();
  std::thread send([&] {
    for (size_t sent = 0; sent < bytes;) {
      const ssize_t n = write(writer, out.data(), std::min(out.size(), bytes - sent));
      if (n <= 0) return;
      sent += static_cast<size_t>(n);
    }
  });
  size_t got = 0;
  while (got < bytes) {
    const ssize_t n = read(reader, in.data(), in.size());
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  send.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return got == bytes ? s : -1.0;
}

}  // namespace

double LoopbackTcpSeconds(size_t bytes, int runs) {
  const auto [writer, reader] = Connect();
  if (writer < 0 || reader < 0) return -1.0;
  std::vector<double> t;
  for (int i = 0; i <= runs; ++i) {
    const double s = OneTransfer(writer, reader, bytes);
    if (s < 0) break;
    if (i > 0) t.push_back(s);  // First is warm-up.
  }
  close(writer);
  close(reader);
  if (t.size() != static_cast<size_t>(runs)) return -1.0;
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace zeroshard
