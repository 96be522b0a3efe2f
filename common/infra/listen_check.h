// Whether this process could listen on HOST:PORT, asked before a server
// library tries (gRPC prints a multi-line dump for a busy port, civetweb
// "null context"), so the user gets one line naming the flag and the
// address. Port 0 (any free port) and "" (off) always pass.
//
// Errors: FAILED_PRECONDITION "<flag> HOST:PORT: address already in use
// (...)" or naming the socket error; INVALID_ARGUMENT for an address that
// is not HOST:PORT or does not resolve. Thread-safe.
#pragma once

#include <string>

#include "absl/status/status.h"

namespace zeroshard {

absl::Status CheckCanListen(const std::string& flag, const std::string& host_port);

}  // namespace zeroshard
