// A minimal fork-join loop for the CPU kernels: splits [0, n) into contiguous
// chunks over ComputeThreads() threads (the caller's thread runs one chunk)
// and joins before returning. Threads are started per call; the kernels use
// it only where one call does enough work (attention over batch x heads) to
// pay for that (~tens of microseconds).
#pragma once

#include <cstdint>
#include <functional>

namespace zeroshard {

// fn(begin, end) for disjoint ranges covering [0, n). Runs inline when one
// thread is configured or n < 2.
void ParallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace zeroshard
