#include "worker/model/local_params.h"

#include <algorithm>
#include <utility>

#include "common/status_macros.h"

namespace zeroshard {

LocalParams::LocalParams(std::vector<std::vector<float>> params)
    : params_(std::move(params)),
      forward_count_(params_.size(), 0),
      backward_count_(params_.size(), 0) {
  for (const std::vector<float>& p : params_) grads_.emplace_back(p.size(), 0.0f);
}

void LocalParams::Begin(int unit, Open kind) {
  ZS_CHECK(unit >= 0 && unit < num_units());
  ZS_CHECK(open_ == Open::kNone);
  open_ = kind;
  open_unit_ = unit;
  (kind == Open::kForward ? forward_count_ : backward_count_)[unit]++;
}

void LocalParams::End(int unit, Open kind) {
  ZS_CHECK(open_ == kind && open_unit_ == unit);
  open_ = Open::kNone;
  open_unit_ = -1;
}

const float* LocalParams::PreForward(int unit) {
  Begin(unit, Open::kForward);
  return params_[unit].data();
}

void LocalParams::PostForward(int unit) { End(unit, Open::kForward); }

UnitBackwardView LocalParams::PreBackward(int unit) {
  Begin(unit, Open::kBackward);
  return {params_[unit].data(), grads_[unit].data()};
}

void LocalParams::PostBackward(int unit) { End(unit, Open::kBackward); }

void LocalParams::ZeroGrads() {
  for (std::vector<float>& g : grads_) std::fill(g.begin(), g.end(), 0.0f);
}

}  // namespace zeroshard
