// A worker's stop request as a value handed to whoever must see it, instead
// of a process-wide flag: a StopSource owns the flag, and the StopTokens it
// gives read it. The worker process's source is set by SIGTERM/SIGINT
// (stop_signal.h); a test or an embedder makes its own and requests the
// stop when it wants to. A default StopToken never stops.
//
// Thread safety: RequestStop and stop_requested may be called from any
// thread, and RequestStop from a signal handler (one lock-free atomic
// store). A StopSource outlives every token it gave.
#pragma once

#include <atomic>

namespace zeroshard {

class StopToken {
 public:
  StopToken() = default;  // Never stops.
  bool stop_requested() const { return flag_ != nullptr && flag_->load(std::memory_order_relaxed); }

 private:
  friend class StopSource;
  explicit StopToken(const std::atomic<bool>* flag) : flag_(flag) {}
  const std::atomic<bool>* flag_ = nullptr;
};

class StopSource {
 public:
  StopSource() = default;
  StopSource(const StopSource&) = delete;
  StopSource& operator=(const StopSource&) = delete;

  // Returns whether a stop had been requested before (async-signal-safe).
  bool RequestStop() { return flag_.exchange(true); }
  bool stop_requested() const { return flag_.load(std::memory_order_relaxed); }
  StopToken token() const { return StopToken(&flag_); }

 private:
  static_assert(std::atomic<bool>::is_always_lock_free);
  std::atomic<bool> flag_{false};
};

}  // namespace zeroshard
