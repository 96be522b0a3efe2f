// ReduceBucket: which closed gradients the stage 2-3 engine reduce-scatters
// together (worker/engine/sharded_engine.h "buckets"; DDP's gradient buckets,
// DeepSpeed's reduce bucket). The traffic model (traffic_model.h) replays the
// same rule to count the reduce-scatters.
//
// Rule: a unit's closed gradient of `bytes` joins the bucket; when it would
// take a non-empty bucket past `capacity` the bucket goes first, and a bucket
// that reaches `capacity` goes at once (capacity <= 0: every gradient alone).
// A unit whose next backward bracket opens while its gradient still waits
// leaves the bucket (Take): the bracket adds into that gradient, which
// rejoins when it closes. Flush sends what is left (the step's end).
//
// Thread safety: none; the training thread owns it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace zeroshard {

class ReduceBucket {
 public:
  explicit ReduceBucket(int64_t capacity) : capacity_(capacity) {}

  // `unit`'s gradient closed: calls issue(units) for each group to reduce
  // now, in order (none, one or two).
  template <typename Issue>
  void Add(int unit, int64_t bytes, Issue&& issue) {
    if (!waiting_.empty() && bytes_ + bytes > capacity_) Flush(issue);
    waiting_.push_back({unit, bytes});
    bytes_ += bytes;
    if (bytes_ >= capacity_) Flush(issue);
  }
  // Whether `unit` was waiting; it leaves the bucket.
  bool Take(int unit) {
    const auto it = std::find_if(waiting_.begin(), waiting_.end(),
                                 [unit](const auto& w) { return w.first == unit; });
    if (it == waiting_.end()) return false;
    bytes_ -= it->second;
    waiting_.erase(it);
    return true;
  }
  // issue(units) for what waits, if anything; the bucket is then empty.
  template <typename Issue>
  void Flush(Issue&& issue) {
    if (waiting_.empty()) return;
    std::vector<int> units;
    for (const auto& w : waiting_) units.push_back(w.first);
    waiting_.clear();
    bytes_ = 0;
    issue(units);
  }

 private:
  int64_t capacity_;
  std::vector<std::pair<int, int64_t>> waiting_;  // (unit, bytes), in join order.
  int64_t bytes_ = 0;
};

}  // namespace zeroshard
