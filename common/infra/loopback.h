// Whether a host (of HOST:PORT, gRPC targets or --listen) is this machine's
// loopback: "localhost", an IPv4 address in 127.0.0.0/8 or the IPv6 ::1
// (brackets allowed), parsed as addresses with inet_pton, so a name such as
// "127.attacker.example" is not loopback. Pure; thread-safe.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace zeroshard {

bool IsLoopbackHost(absl::string_view host);
// The host part of HOST:PORT, "[v6]:PORT", a bare host, or a gRPC target
// such as "dns:///host:port" or "ipv4:host:port" (the scheme dropped).
std::string HostOfTarget(absl::string_view target);

}  // namespace zeroshard
