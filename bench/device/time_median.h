// The timing loop the device benchmarks share: the median of `reps` runs,
// each timed from issue to Device::Synchronize, after one warm-up run.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/status/statusor.h"
#include "common/status_macros.h"
#include "worker/device/device.h"

namespace zeroshard::bench {

// Median seconds of `reps` runs of fn (returning absl::Status) + Synchronize.
template <typename Fn>
absl::StatusOr<double> TimeMedian(Device& device, int reps, Fn&& fn) {
  std::vector<double> seconds;
  for (int r = 0; r <= reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    ZS_RETURN_IF_ERROR(fn());
    ZS_RETURN_IF_ERROR(device.Synchronize(absl::Seconds(120)));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) seconds.push_back(s);  // Run 0 warms caches, pages and the GPU clock.
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

}  // namespace zeroshard::bench
