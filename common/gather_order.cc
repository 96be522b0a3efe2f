#include "common/gather_order.h"

#include <algorithm>
#include <utility>

namespace zeroshard {
namespace {

// The distinct units of order[begin, end), in order of first appearance.
std::vector<int> Distinct(const std::vector<int>& order, size_t begin, size_t end) {
  std::vector<int> out;
  for (size_t i = begin; i < end; ++i) {
    if (std::find(out.begin(), out.end(), order[i]) == out.end()) out.push_back(order[i]);
  }
  return out;
}

}  // namespace

GatherOrder::GatherOrder(int num_units) {
  for (int u = 0; u < num_units; ++u) order_.push_back(u);
  for (int u = num_units - 1; u >= 0; --u) order_.push_back(u);
  CutBuckets();
}

void GatherOrder::SetBuckets(std::vector<int64_t> unit_weight, int64_t capacity) {
  weight_ = std::move(unit_weight);
  capacity_ = capacity;
  CutBuckets();
}

void GatherOrder::CutBuckets() {
  const size_t n = order_.size();
  bucket_end_.assign(n, 0);
  auto weight = [&](int u) {
    return u >= 0 && static_cast<size_t>(u) < weight_.size() ? weight_[u] : 0;
  };
  for (size_t begin = 0; begin < n;) {
    size_t end = begin + 1;
    if (capacity_ > 0) {
      std::vector<int> units{order_[begin]};
      int64_t sum = weight(order_[begin]);
      for (; end < n; ++end) {
        const int u = order_[end];
        if (std::find(units.begin(), units.end(), u) != units.end()) continue;
        if (sum + weight(u) > capacity_) break;
        units.push_back(u);
        sum += weight(u);
      }
    }
    for (size_t i = begin; i < end; ++i) bucket_end_[i] = end;
    begin = end;
  }
}

size_t GatherOrder::WindowEnd(int count) const {
  size_t end = std::max(cursor_, CurrentBucketEnd());
  for (int b = 0; b < count && end < order_.size(); ++b) end = bucket_end_[end];
  return std::min(end, order_.size());
}

std::vector<int> GatherOrder::Ahead(int count) const {
  const size_t begin = std::min(cursor_, order_.size());
  return std::vector<int>(
      order_.begin() + static_cast<std::ptrdiff_t>(begin),
      order_.begin() + static_cast<std::ptrdiff_t>(std::max(begin, WindowEnd(count))));
}

std::vector<std::vector<int>> GatherOrder::WindowBuckets(int count) const {
  const size_t begin = std::min(cursor_, order_.size());
  size_t end = std::max(begin, std::min(CurrentBucketEnd(), order_.size()));
  std::vector<std::vector<int>> out{Distinct(order_, begin, end)};
  for (int b = 0; b < count && end < order_.size(); ++b) {
    out.push_back(Distinct(order_, end, bucket_end_[end]));
    end = bucket_end_[end];
  }
  return out;
}

bool GatherOrder::Expects(int unit, int count) const {
  const auto begin = order_.begin() + static_cast<std::ptrdiff_t>(std::min(cursor_, order_.size()));
  const auto end = order_.begin() + static_cast<std::ptrdiff_t>(WindowEnd(std::max(count, 0)));
  return begin < end && std::find(begin, end, unit) != end;
}

std::vector<int> GatherOrder::Record(int unit, int count) {
  if (recorded_.size() < kMaxRecorded) recorded_.push_back(unit);
  if (cursor_ < order_.size() && order_[cursor_] == unit) {
    ++cursor_;
  } else {
    const auto first = std::find(order_.begin(), order_.end(), unit);
    cursor_ =
        first == order_.end() ? order_.size() : static_cast<size_t>(first - order_.begin()) + 1;
  }
  return Ahead(count);
}

std::vector<int> GatherOrder::EndStep(int count) {
  if (!recorded_.empty()) {
    order_ = std::move(recorded_);
    CutBuckets();
  }
  recorded_.clear();
  cursor_ = 0;
  return Ahead(count);
}

}  // namespace zeroshard
