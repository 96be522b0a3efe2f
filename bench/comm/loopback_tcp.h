// The single-stream loopback TCP limit the CPU collectives are measured
// against (issue: bus bandwidth >= 0.8 of it): one connection on 127.0.0.1,
// 4 MiB socket buffers, one thread writing `bytes` in 4 MiB writes and one
// reading them, timed from the first write to the last byte read.
#pragma once

#include <cstddef>

namespace zeroshard {

// Median seconds over `runs` transfers of `bytes` after one warm-up; a
// negative value when a socket call failed (printed to stderr).
double LoopbackTcpSeconds(size_t bytes, int runs);

}  // namespace zeroshard
