#include "common/gather_order.h"

#include <algorithm>

namespace zeroshard {

GatherOrder::GatherOrder(int num_units) {
  for (int u = 0; u < num_units; ++u) order_.push_back(u);
  for (int u = num_units - 1; u >= 0; --u) order_.push_back(u);
}

std::vector<int> GatherOrder::Ahead(int count) const {
  std::vector<int> out;
  for (size_t i = cursor_; i < order_.size() && static_cast<int>(out.size()) < count; ++i) {
    out.push_back(order_[i]);
  }
  return out;
}

bool GatherOrder::Expects(int unit, int count) const {
  const size_t end = std::min(order_.size(), cursor_ + static_cast<size_t>(std::max(count, 0)));
  return std::find(order_.begin() + static_cast<std::ptrdiff_t>(cursor_),
                   order_.begin() + static_cast<std::ptrdiff_t>(end), unit) !=
         order_.begin() + static_cast<std::ptrdiff_t>(end);
}

std::vector<int> GatherOrder::Record(int unit, int count) {
  if (recorded_.size() < kMaxRecorded) recorded_.push_back(unit);
  if (cursor_ < order_.size() && order_[cursor_] == unit) {
    ++cursor_;
  } else {
    const auto first = std::find(order_.begin(), order_.end(), unit);
    cursor_ = first == order_.end() ? order_.size()
                                    : static_cast<size_t>(first - order_.begin()) + 1;
  }
  return Ahead(count);
}

std::vector<int> GatherOrder::EndStep(int count) {
  if (!recorded_.empty()) order_ = std::move(recorded_);
  recorded_.clear();
  cursor_ = 0;
  return Ahead(count);
}

}  // namespace zeroshard
