// An injectable clock, so time-driven logic (leases, settle delays, waits)
// is tested without sleeps. Thread-safe.
#pragma once

#include <atomic>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace zeroshard {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  static RealClock* Get() {
    static RealClock clock;
    return &clock;
  }
};

// Starts at the Unix epoch + 1e9 s and moves only when Advance is called.
class FakeClock final : public Clock {
 public:
  absl::Time Now() const override {
    return absl::FromUnixNanos(nanos_.load(std::memory_order_acquire));
  }
  void Advance(absl::Duration d) {
    nanos_.fetch_add(absl::ToInt64Nanoseconds(d), std::memory_order_acq_rel);
  }

 private:
  std::atomic<int64_t> nanos_{int64_t{1'000'000'000} * 1'000'000'000};
};

}  // namespace zeroshard
