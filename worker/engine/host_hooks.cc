#include "worker/engine/host_hooks.h"

#include <cstdio>
#include <string>

#include "common/status_macros.h"

namespace zeroshard {

HostHooks::HostHooks(const ShardPlan& plan, Device* device, UnitHooks* inner,
                     absl::Duration timeout)
    : plan_(plan), device_(device), inner_(inner), timeout_(timeout), units_(plan.units.size()) {}

// A copy that has landed when it returns (the host reads or reuses it next).
void HostHooks::Copy(void* dst, const void* src, int64_t floats) {
  absl::Status s = device_->Copy(dst, src, floats * 4);
  if (s.ok()) s = device_->Synchronize(timeout_);
  if (!s.ok()) std::fprintf(stderr, "zeroshard host hooks: %s\n", std::string(s.message()).c_str());
  ZS_CHECK(s.ok());
}

const float* HostHooks::HostParams(int u, const float* device_params) {
  Unit& unit = units_[u];
  if (unit.param_refs++ == 0) {
    const int64_t P = plan_.units[u].padded_numel;
    unit.params.resize(static_cast<size_t>(P));
    Copy(unit.params.data(), device_params, P);
  }
  return unit.params.data();
}

void HostHooks::ReleaseParams(int u) {
  Unit& unit = units_[u];
  ZS_CHECK(unit.param_refs > 0);
  if (--unit.param_refs == 0) {
    unit.params.clear();
    unit.params.shrink_to_fit();
  }
}

const float* HostHooks::PreForward(int u) { return HostParams(u, inner_->PreForward(u)); }

void HostHooks::PostForward(int u) {
  ReleaseParams(u);
  inner_->PostForward(u);
}

UnitBackwardView HostHooks::PreBackward(int u) {
  const UnitBackwardView device_view = inner_->PreBackward(u);
  const float* params = HostParams(u, device_view.params);
  Unit& unit = units_[u];
  if (unit.grad_refs++ == 0) {
    const int64_t P = plan_.units[u].padded_numel;
    unit.device_grads = device_view.grads;
    unit.grads.resize(static_cast<size_t>(P));
    Copy(unit.grads.data(), unit.device_grads, P);
  }
  return {params, unit.grads.data()};
}

void HostHooks::PostBackward(int u) {
  Unit& unit = units_[u];
  ZS_CHECK(unit.grad_refs > 0);
  if (--unit.grad_refs == 0) {
    Copy(unit.device_grads, unit.grads.data(), plan_.units[u].padded_numel);
    unit.grads.clear();
    unit.grads.shrink_to_fit();
    unit.device_grads = nullptr;
  }
  ReleaseParams(u);
  inner_->PostBackward(u);
}

}  // namespace zeroshard
