// Whether heartbeats are served on time, for /readyz: a coordinator whose
// heartbeats are slow (a stalled lock, starved threads) lets leases expire
// while its process looks healthy (issue 16). Every heartbeat, unary or
// streamed, runs through Timed (a Timing for its whole run); Ready() is
// false while a heartbeat has been in flight longer than `limit`, and for
// `window` after one took longer.
//
// Thread-safe: any method from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace zeroshard::server {

class HeartbeatWatchdog {
 public:
  HeartbeatWatchdog(absl::Duration limit, absl::Duration window) : limit_(limit), window_(window) {}

  // Times one heartbeat from construction to destruction.
  class Timing {
   public:
    explicit Timing(HeartbeatWatchdog* w) : w_(w), id_(w->Start()) {}
    ~Timing() { w_->Stop(id_); }
    Timing(const Timing&) = delete;
    Timing& operator=(const Timing&) = delete;

   private:
    HeartbeatWatchdog* w_;
    uint64_t id_;
  };

  // Runs `heartbeat` under a Timing of `w`; untimed when `w` is null.
  template <typename F>
  static auto Timed(HeartbeatWatchdog* w, F&& heartbeat) {
    std::optional<Timing> timing;
    if (w != nullptr) timing.emplace(w);
    return heartbeat();
  }

  bool Ready(absl::Time now = absl::Now()) const {
    absl::MutexLock lock(&mu_);
    if (now - last_slow_ < window_) return false;
    return in_flight_.empty() || now - in_flight_.begin()->second.start <= limit_;
  }

 private:
  struct Flight {
    absl::Time start;
  };
  uint64_t Start() {
    absl::MutexLock lock(&mu_);
    in_flight_.emplace(next_, Flight{absl::Now()});
    return next_++;
  }
  void Stop(uint64_t id) {
    absl::MutexLock lock(&mu_);
    auto it = in_flight_.find(id);
    const absl::Time now = absl::Now();
    if (now - it->second.start > limit_) last_slow_ = now;
    in_flight_.erase(it);
  }

  const absl::Duration limit_;
  const absl::Duration window_;
  mutable absl::Mutex mu_;
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Flight> in_flight_ ABSL_GUARDED_BY(mu_);  // By start order.
  absl::Time last_slow_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace zeroshard::server
