// An unsharded UnitHooks: holds every unit's full fp32 parameters and
// gradients in ordinary vectors. Used by tests, by references that need the
// whole model in one place, and by the single-process unsharded baseline.
//
// It checks the hook contract (worker/engine/unit_hooks.h) as it goes: at
// most one bracket open at a time, Post* matching the open Pre*, unit indices
// in range (a violation is a bug in the model: ZS_CHECK). Gradients
// accumulate until ZeroGrads(). Not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "worker/engine/unit_hooks.h"

namespace zeroshard {

class LocalParams : public UnitHooks {
 public:
  // One full buffer per unit (e.g. from InitUnits); gradients start at zero.
  explicit LocalParams(std::vector<std::vector<float>> params);

  const float* PreForward(int unit) override;
  void PostForward(int unit) override;
  UnitBackwardView PreBackward(int unit) override;
  void PostBackward(int unit) override;

  void ZeroGrads();
  int num_units() const { return static_cast<int>(params_.size()); }
  std::vector<float>& params(int unit) { return params_[unit]; }
  const std::vector<float>& grads(int unit) const { return grads_[unit]; }
  // Brackets opened so far per unit (forward, backward), for tests of the
  // call order.
  int forward_brackets(int unit) const { return forward_count_[unit]; }
  int backward_brackets(int unit) const { return backward_count_[unit]; }

 private:
  enum class Open { kNone, kForward, kBackward };
  void Begin(int unit, Open kind);
  void End(int unit, Open kind);

  std::vector<std::vector<float>> params_;
  std::vector<std::vector<float>> grads_;
  std::vector<int> forward_count_, backward_count_;
  Open open_ = Open::kNone;
  int open_unit_ = -1;
};

}  // namespace zeroshard
