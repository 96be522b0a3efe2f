// `zeroshard plan --link-bandwidth measure`: the bus bandwidth of a loopback
// Gloo all-gather between two local ranks (threads), as nccl-tests reports
// it (busbw = bytes * (N-1)/N / seconds, doc/PERFORMANCE.md). It measures
// this machine's loopback, not a network link between machines.
// Not thread-safe (call once).
#pragma once

#include "absl/status/statusor.h"

namespace zeroshard::cli {

// Bytes per second. Errors: the communicator's (UNAVAILABLE, DEADLINE_EXCEEDED
// after 30 s per collective).
absl::StatusOr<double> MeasureLoopbackBusBandwidth();

}  // namespace zeroshard::cli
