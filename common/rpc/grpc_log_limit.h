// gRPC's own log lines, rate-limited per source line (issue 40: no denial
// of service without credentials). gRPC logs one error line for each
// connection whose TLS handshake times out, so thousands of idle
// connections from anyone would write thousands of lines: a flood for the
// log collector, and a process that blocks on a full stderr pipe.
//
// After InstallGrpcLogLimit, each gRPC source line (file:line) prints at
// most `per_window` lines per `window`; the rest are counted and reported
// as one line ("N more like it suppressed") when that source next prints.
// Lines below gRPC's verbosity (GRPC_VERBOSITY) are dropped as before.
//
// Thread safety: the installed function is thread-safe. Call once, early
// in main (a second call replaces the limits).
#pragma once

#include "absl/time/time.h"

namespace zeroshard {

void InstallGrpcLogLimit(int per_window = 5, absl::Duration window = absl::Seconds(60));

}  // namespace zeroshard
