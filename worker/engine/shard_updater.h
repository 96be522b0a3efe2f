// The step's update of one rank's shards (sharded_engine.h): the global
// gradient norm, the clip, and the fused AdamW on each unit's optimizer
// range (Loshchilov & Hutter, "Decoupled Weight Decay Regularization",
// Algorithm 2; worker/optim/adamw.h), writing the new compute copy where
// the stage's next use reads it:
// - the norm: each rank sums the squares of its shard of the reduced
//   gradient on the device, and one scalar all-reduce over the control
//   communicator adds the ranks' sums (none where every rank holds it all);
//   the clip is torch.nn.utils.clip_grad_norm_'s, min(1, max / (norm + 1e-6));
// - the update: through the OptimizerStore (resident, host or NVMe: it
//   streams unit u+1 in while u is updated); the compute copy goes to the
//   rank's slice of the full buffer and is all-gathered in place (stages
//   1-2: ZeroStage::gathers_after_step), to the resident shard (stage 3),
//   to the whole buffer (stage 0), or to the ParamStore (params offload).
//
// Testable without a model: units, a device, a store and a communicator
// suffice (tests/engine/engine_parts_test.cc).
//
// Thread safety: the engine's training thread only.
#pragma once

#include <functional>

#include "absl/status/statusor.h"
#include "worker/engine/collective_tracker.h"
#include "worker/engine/engine_context.h"
#include "worker/engine/gradient_reducer.h"
#include "worker/offload/optimizer_store.h"
#include "worker/offload/param_store.h"

namespace zeroshard {

class ShardUpdater {
 public:
  // `control`: the communicator for the norm's scalar (host memory).
  // `params`: the stage-3 parameter store with params offload, else null.
  ShardUpdater(const EngineContext& ctx, Communicator* control, OptimizerStore* opt,
               ParamStore* params, const GradientReducer* reducer);

  // Sum of squares of the reduced gradient over every rank's shard. The
  // host reads a value here: every stream-ordered collective is checked
  // first (the tracker's first error).
  absl::StatusOr<double> GlobalSumSquares();
  // AdamW step `step` (1-based, for bias correction) on every unit with
  // gradient multiplier `multiplier` (scale and clip together), then the
  // stage's all-gather of the new compute copy.
  absl::Status Update(int64_t step, float multiplier);
  // Params offload: `fill` writes unit u's new compute shard into device
  // memory it is given; the shard then goes to the store.
  absl::Status WriteParamShard(int u, const std::function<absl::Status(void*)>& fill);

 private:
  absl::Status UpdateUnit(int u, int64_t step, float multiplier, DeviceBuffer& grad32);

  EngineContext ctx_;
  Communicator* control_;
  OptimizerStore* opt_;
  ParamStore* params_;
  const GradientReducer* reducer_;
};

}  // namespace zeroshard
