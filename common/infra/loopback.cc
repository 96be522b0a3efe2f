#include "common/infra/loopback.h"

#include <arpa/inet.h>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"

namespace zeroshard {

bool IsLoopbackHost(absl::string_view host) {
  if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]")) {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost") return true;
  const std::string text(host);
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return inet_pton(AF_INET6, text.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

std::string HostOfTarget(absl::string_view target) {
  for (absl::string_view scheme : {"dns:///", "dns:", "ipv4:", "ipv6:"}) {
    if (absl::ConsumePrefix(&target, scheme)) break;
  }
  if (absl::StartsWith(target, "[")) {
    const size_t close = target.find(']');
    return std::string(close == absl::string_view::npos ? target : target.substr(0, close + 1));
  }
  // One colon: HOST:PORT; several: a bare IPv6 address.
  const size_t colon = target.find(':');
  if (colon != absl::string_view::npos && target.find(':', colon + 1) == absl::string_view::npos) {
    return std::string(target.substr(0, colon));
  }
  return std::string(target);
}

}  // namespace zeroshard
