// `zeroshard plan --link-bandwidth measure`: the bus bandwidth of an
// all-gather between two local ranks (threads) on a CPU backend, as
// nccl-tests reports it (busbw = bytes * (N-1)/N / seconds,
// doc/PERFORMANCE.md): "shm" (shared memory, what `zeroshard launch` uses on
// the CPU) or "gloo" (loopback TCP). It measures this machine, not a
// network link between machines.
// Not thread-safe (call once).
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace zeroshard::cli {

// Bytes per second. Errors: INVALID_ARGUMENT for a backend other than
// "gloo" or "shm"; the communicator's (UNAVAILABLE, DEADLINE_EXCEEDED after
// 30 s per collective).
absl::StatusOr<double> MeasureLoopbackBusBandwidth(const std::string& backend);

}  // namespace zeroshard::cli
