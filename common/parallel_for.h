// Splits [0, n) into contiguous chunks run on up to `num_threads` threads
// (the caller runs the first chunk). Threads are started per call: a call
// moves megabytes, so the ~20 us of thread start-up is small beside it, and
// nothing outlives the call. Chunk boundaries are multiples of `align`
// elements so SIMD loops see aligned-size chunks.
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace zeroshard {

// 0 = hardware concurrency, capped at 16.
inline int ResolveThreads(int num_threads) {
  if (num_threads > 0) return num_threads;
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(hw, 1, 16);
}

// fn(chunk, begin, end) for each chunk; chunk < num_threads. Each thread gets at least
// `min_per_thread` elements, so small inputs stay on the calling thread.
template <typename Fn>
void ParallelFor(int64_t n, int num_threads, int64_t min_per_thread, int64_t align, Fn&& fn) {
  int threads = ResolveThreads(num_threads);
  threads = static_cast<int>(std::min<int64_t>(threads, std::max<int64_t>(1, n / min_per_thread)));
  if (threads <= 1) {
    fn(0, int64_t{0}, n);
    return;
  }
  int64_t chunk = (n + threads - 1) / threads;
  chunk = (chunk + align - 1) / align * align;
  std::vector<std::thread> workers;
  workers.reserve(threads - 1);
  for (int t = 1; t < threads; ++t) {
    const int64_t begin = std::min(n, t * chunk), end = std::min(n, (t + 1) * chunk);
    if (begin < end) workers.emplace_back([&fn, t, begin, end] { fn(t, begin, end); });
  }
  fn(0, int64_t{0}, std::min(n, chunk));
  for (std::thread& w : workers) w.join();
}

}  // namespace zeroshard
