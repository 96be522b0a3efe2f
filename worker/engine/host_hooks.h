// HostHooks: UnitHooks for a model that computes on the host (the CPU
// kernels, a test's own gradients) over hooks whose buffers are device
// memory (a ShardedEngine on a CUDA device). It is the bridge that lets the
// host model train with the engine, its collectives (NCCL, host-staged) and
// its optimizer on the GPU; a model with device kernels calls the engine's
// hooks directly instead.
//
// How it works, per unit u (padded_numel P, fp32): the first acquire of a
// bracket copies the device parameters into a host buffer and the model
// sees that; PreBackward also copies the device gradient (the running sum
// the model adds into) to the host, and the last PostBackward copies it
// back. The model's adds therefore happen in fp32 on the host exactly as on
// the CPU device: results are bit-identical to running the engine on the
// CPU device. Nested brackets of one unit share the host buffers.
//
// Costs 2P*4 bytes of copies per forward bracket and 4P*4 per backward one
// (shown as host memory, not in the engine's accounting). Errors from the
// device (a failed copy, a wait past `timeout`) cannot be returned by a hook:
// they end the process with the reason (ZS_CHECK), as an engine allocation
// failure does. Thread safety: as UnitHooks (one training thread).
#pragma once

#include <vector>

#include "absl/time/time.h"
#include "common/shard_plan.h"
#include "worker/device/device.h"
#include "worker/engine/unit_hooks.h"

namespace zeroshard {

class HostHooks final : public UnitHooks {
 public:
  // `device` and `inner` must outlive this; `plan` gives each unit's size.
  HostHooks(const ShardPlan& plan, Device* device, UnitHooks* inner,
            absl::Duration timeout = absl::Seconds(60));

  const float* PreForward(int unit) override;
  void PostForward(int unit) override;
  UnitBackwardView PreBackward(int unit) override;
  void PostBackward(int unit) override;

 private:
  struct Unit {
    std::vector<float> params, grads;
    int param_refs = 0, grad_refs = 0;
    float* device_grads = nullptr;
  };
  const float* HostParams(int unit, const float* device_params);
  void ReleaseParams(int unit);
  void Copy(void* dst, const void* src, int64_t floats);

  const ShardPlan& plan_;
  Device* device_;
  UnitHooks* inner_;
  absl::Duration timeout_;
  std::vector<Unit> units_;
};

}  // namespace zeroshard
