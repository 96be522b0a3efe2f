// The loopback TCP limits the CPU collectives are measured against:
//   one stream (the issue's: bus bandwidth >= 0.8 of it): one connection on
//     127.0.0.1, 4 MiB socket buffers, one thread writing `bytes` in 4 MiB
//     writes and one reading them (from and into buffers as LoopbackBuffers
//     says), timed from the first write to the last byte read;
//   the aggregate: k connections carrying bytes / k each at the same time,
//     for k = 1, 2, 4, 8, the best rate. Every byte a collective moves over
//     TCP here crosses loopback, and all ranks' streams share the same
//     cores, so a collective of N ranks, which must deliver (N-1)/N of the
//     buffer to each rank, has bus bandwidth at most aggregate / N, whatever
//     its algorithm or connection count (it carries (N-1) x the buffer in
//     all; busbw = (N-1)/N x buffer / time).
#pragma once

#include <cstddef>

namespace zeroshard {

// Where a stream's bytes come from and go to. kFullSize (the limits'
// definition): a source and a destination of `bytes` each, as a collective
// reads its input and writes its output: from 64 MiB on, both come from
// and go to DRAM. kReused4MiB (the definition before 2026-12-05): one 4 MiB
// block written again and again and one read into again and again, which
// stay in the caches, so the rate is higher than any collective of that
// size could reach: 1 stream 3.9-4.3 GB/s against 3.9-4.0, 4 streams
// 6.5-7.8 against 5.8, on the 2-core EPYC (bench/comm/README.md).
enum class LoopbackBuffers { kFullSize, kReused4MiB };

// Median seconds over `runs` transfers of `bytes` after one warm-up; a
// negative value when a socket call failed (printed to stderr).
double LoopbackTcpSeconds(size_t bytes, int runs, LoopbackBuffers kind);
// The same for `links` connections carrying `bytes` each at once.
double LoopbackLinksSeconds(size_t bytes, int links, int runs, LoopbackBuffers kind);
// The aggregate above, bytes per second (negative on a socket failure).
double LoopbackAggregateBytesPerSecond(size_t bytes, int runs, LoopbackBuffers kind);

}  // namespace zeroshard
