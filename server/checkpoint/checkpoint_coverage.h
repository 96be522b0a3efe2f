// Which element ranges of one (rank, unit, kind) have arrived: a set of
// disjoint half-open intervals, merged on insert. Re-sent ranges are allowed
// (an upload retried after a broken stream overwrites the same bytes).
// Not thread-safe; the owner locks.
#pragma once

#include <cstdint>
#include <iterator>
#include <map>

namespace zeroshard::server {

class IntervalSet {
 public:
  // Adds [begin, end); begin < end.
  void Add(int64_t begin, int64_t end) {
    auto it = intervals_.upper_bound(begin);
    if (it != intervals_.begin()) {
      auto prev = std::prev(it);
      if (prev->second >= begin) {  // Overlaps or touches the previous one.
        begin = prev->first;
        if (prev->second > end) end = prev->second;
        it = intervals_.erase(prev);
      }
    }
    while (it != intervals_.end() && it->first <= end) {
      if (it->second > end) end = it->second;
      it = intervals_.erase(it);
    }
    intervals_.emplace(begin, end);
  }

  // True when [begin, end) lies inside one merged interval.
  bool Covers(int64_t begin, int64_t end) const {
    if (begin >= end) return true;
    auto it = intervals_.upper_bound(begin);
    if (it == intervals_.begin()) return false;
    --it;
    return it->first <= begin && it->second >= end;
  }

  int64_t CoveredElements() const {
    int64_t n = 0;
    for (const auto& [b, e] : intervals_) n += e - b;
    return n;
  }

 private:
  std::map<int64_t, int64_t> intervals_;  // begin -> end
};

}  // namespace zeroshard::server
