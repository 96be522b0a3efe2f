#include "bench/comm/loopback_tcp.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <initializer_list>
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

// Each pair's source and destination: `bytes` apart in memory for
// kFullSize, one reused 4 MiB block for kReused4MiB (both touched before the
// clock starts).
struct PairBuffers {
  PairBuffers(size_t bytes, LoopbackBuffers kind)
      : out(kind == LoopbackBuffers::kFullSize ? bytes : std::min<size_t>(bytes, kBufferBytes), 1),
        in(out.size(), 0) {}
  std::vector<char> out, in;
};

// Every pair's writer sends `bytes` while its reader takes them, all pairs
// at once; seconds until the last is done, negative if one fell short.
// Writes and reads move at most 4 MiB a call, through `buffers[p]`, from
// the offset reached where the buffers are full size.
double OneTransfer(const std::vector<std::pair<int, int>>& pairs, size_t bytes,
                   std::vector<PairBuffers>& buffers) {
  std::vector<size_t> got(pairs.size(), 0);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (size_t p = 0; p < pairs.size(); ++p) {
    threads.emplace_back([&, p, &out = buffers[p].out] {
      for (size_t sent = 0; sent < bytes;) {
        const size_t at = out.size() == bytes ? sent : 0;
        const size_t len = std::min<size_t>({out.size() - at, bytes - sent, size_t{kBufferBytes}});
        const ssize_t n = write(pairs[p].first, out.data() + at, len);
        if (n <= 0) return;
        sent += static_cast<size_t>(n);
      }
    });
    threads.emplace_back([&, p, &in = buffers[p].in] {
      while (got[p] < bytes) {
        const size_t at = in.size() == bytes ? got[p] : 0;
        const size_t len = std::min<size_t>({in.size() - at, bytes - got[p], size_t{kBufferBytes}});
        const ssize_t n = read(pairs[p].second, in.data() + at, len);
        if (n <= 0) break;
        got[p] += static_cast<size_t>(n);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (size_t g : got) {
    if (g != bytes) return -1.0;
  }
  return s;
}

}  // namespace

double LoopbackLinksSeconds(size_t bytes, int links, int runs, LoopbackBuffers kind) {
  std::vector<PairBuffers> buffers;
  for (int l = 0; l < links; ++l) buffers.emplace_back(bytes, kind);
  std::vector<std::pair<int, int>> pairs;
  for (int l = 0; l < links; ++l) {
    pairs.push_back(Connect());
    if (pairs.back().first < 0 || pairs.back().second < 0) return -1.0;
  }
  std::vector<double> t;
  for (int i = 0; i <= runs; ++i) {
    const double s = OneTransfer(pairs, bytes, buffers);
    if (s < 0) break;
    if (i > 0) t.push_back(s);  // First is warm-up.
  }
  for (const auto& [writer, reader] : pairs) {
    close(writer);
    close(reader);
  }
  if (t.size() != static_cast<size_t>(runs)) return -1.0;
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double LoopbackTcpSeconds(size_t bytes, int runs, LoopbackBuffers kind) {
  return LoopbackLinksSeconds(bytes, 1, runs, kind);
}

double LoopbackAggregateBytesPerSecond(size_t bytes, int runs, LoopbackBuffers kind) {
  double best = -1.0;
  for (int links : {1, 2, 4, 8}) {
    const double s = LoopbackLinksSeconds(bytes / links, links, runs, kind);
    if (s < 0) return -1.0;
    best = std::max(best, static_cast<double>(bytes / links * links) / s);
  }
  return best;
}

}  // namespace zeroshard
