// ShardedEngine::Step: gradient reduction (stages 0-1), global-norm
// clipping, the fused AdamW shard update, and the parameter all-gather
// (stages 1-2). See sharded_engine.h.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/comm/control_collectives.h"
#include "worker/engine/sharded_engine.h"
#include "worker/optim/job_adamw.h"

namespace zeroshard {

void* ShardedEngine::ShardGrad(Unit& unit) const {
  if (zero_stage().reduction == GradReduction::kReduceScatterAtStep) {
    return Slice(unit.grads, unit.plan->shard_numel, gbytes());
  }
  return unit.grads.data();  // All of P at stage 0, the shard at stages 2-3.
}

// Stage 0: all-reduce each full gradient; stage 1: reduce-scatter it in place
// (the rank's slice then holds the sum). Stages 2-3 reduced in PostBackward:
// a unit no backward wrote gets its zeros now (Unit::grads_zero).
absl::Status ShardedEngine::ReduceGradients() {
  const GradReduction reduction = zero_stage().reduction;
  if (reduction == GradReduction::kReduceScatterInBackward) {
    for (Unit& unit : units_) {
      if (!unit.grads_zero) continue;
      ZS_RETURN_IF_ERROR(device_->Memset(unit.grads.data(), 0, unit.grads.bytes()));
    }
    return absl::OkStatus();
  }
  const CollectiveOptions copts{options_.collective_timeout};
  std::vector<std::unique_ptr<Work>> works;
  for (Unit& unit : units_) {
    const int64_t S = unit.plan->shard_numel;
    works.push_back(reduction == GradReduction::kAllReduceAtStep
                        ? comm_->AllReduce(unit.grads.data(), unit.grads.data(),
                                           unit.plan->padded_numel, options_.reduce_dtype,
                                           ReduceOp::kSum, copts)
                        : comm_->ReduceScatter(unit.grads.data(), Slice(unit.grads, S, gbytes()), S,
                                               options_.reduce_dtype, ReduceOp::kSum, copts));
  }
  for (std::unique_ptr<Work>& w : works) {
    if (absl::Status s = Sequence(w); !s.ok()) {
      for (Unit& unit : units_) Retire(unit.grads);  // [Note: failed collective buffers]
      return s;
    }
  }
  return absl::OkStatus();
}

// Sum of squares of the summed gradient over all ranks' shards: each rank
// sums its shard, one scalar all-reduce (stage 0: every rank has it all).
absl::StatusOr<double> ShardedEngine::GlobalSumSquares() {
  // Accumulated on the device; the host reads one double.
  DeviceBuffer acc = Buffer(MemoryKind::kBuffers);
  ZS_RETURN_IF_ERROR(acc.Allocate(sizeof(double)));
  for (Unit& unit : units_) {
    ZS_RETURN_IF_ERROR(device_->SumSquaresAccumulate(ShardGrad(unit), options_.reduce_dtype,
                                                     unit.opt_range.length, acc.as<double>()));
  }
  double sum_sq = 0.0;
  ZS_RETURN_IF_ERROR(device_->Copy(&sum_sq, acc.data(), sizeof(double)));
  // The host reads a value: every stream-ordered collective is checked here.
  ZS_RETURN_IF_ERROR(AwaitInFlight());
  ZS_RETURN_IF_ERROR(device_->Synchronize(options_.collective_timeout));
  if (zero_stage().replicated() || world_size_ == 1) return sum_sq;
  absl::StatusOr<std::vector<double>> global = AllReduceControl(
      *control_comm_, std::vector<double>{sum_sq}, ReduceOp::kSum, options_.collective_timeout);
  if (!global.ok()) {
    Fail(global.status());
    return global.status();
  }
  return (*global)[0];
}

// Fused AdamW on every unit's shard with gradient multiplier `multiplier`;
// the compute copy goes straight into the all-gather input (the rank's slice
// of the full buffer at stages 1-2, the resident shard at stage 3, the whole
// buffer at stage 0), then stages 1-2 all-gather it in place.
absl::Status ShardedEngine::UpdateShards(float multiplier) {
  const bool gathers = zero_stage().gathers_after_step;
  DeviceBuffer grad32 = Buffer(MemoryKind::kBuffers);
  std::vector<std::unique_ptr<Work>> works;
  const int num_units = static_cast<int>(units_.size());
  for (int u = 0; u < num_units; ++u) {
    Unit& unit = units_[u];
    const int64_t n = unit.opt_range.length, S = unit.plan->shard_numel;
    const float* g = static_cast<const float*>(ShardGrad(unit));
    if (options_.reduce_dtype != DType::kFp32) {
      ZS_RETURN_IF_ERROR(grad32.Allocate(n * 4));
      ZS_RETURN_IF_ERROR(
          device_->Convert(ShardGrad(unit), DType::kBf16, grad32.data(), DType::kFp32, n));
      g = grad32.as<float>();
    }
    void* out = gathers ? Slice(unit.params, S, cbytes()) : unit.params.data();
    // The store streams units: u + 1 is read ahead while u is updated.
    auto update = [&](void* dst) {
      return opt_->Update(u, u + 1 < num_units ? u + 1 : 0, options_.adamw, step_, multiplier, g,
                          dst, options_.compute_dtype);
    };
    // With params offload the new shard goes to the parameter store.
    ZS_RETURN_IF_ERROR(params_ != nullptr ? WriteParamShard(u, update) : update(out));
    grad32.Free();  // Stream-ordered on CUDA: after the update that reads it.
    if (gathers) {
      works.push_back(comm_->AllGather(out, unit.params.data(), S, options_.compute_dtype,
                                       {options_.collective_timeout}));
    }
  }
  for (std::unique_ptr<Work>& w : works) ZS_RETURN_IF_ERROR(Sequence(w));
  return absl::OkStatus();
}

void ShardedEngine::ZeroGradients() {
  for (Unit& unit : units_) {
    if (zero_stage().reduction == GradReduction::kReduceScatterInBackward) {
      unit.grads_zero = true;  // The next reduce-scatter overwrites them.
    } else {
      Fail(device_->Memset(unit.grads.data(), 0, unit.grads.bytes()));
    }
  }
}

absl::StatusOr<StepResult> ShardedEngine::Step(float grad_scale) {
  for (const Unit& unit : units_) {
    if (unit.param_refs > 0 || unit.grad_refs > 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("Step called while unit '", unit.plan->name, "' is bracketed"));
    }
  }
  if (compute_copy_stale_) {
    return absl::FailedPreconditionError(
        "Step called after LoadShardState without RebuildComputeCopy");
  }
  ZS_RETURN_IF_ERROR(DrainAll());
  ZS_RETURN_IF_ERROR(ReduceGradients());
  ZS_ASSIGN_OR_RETURN(const double sum_sq, GlobalSumSquares());
  // The engine averages over ranks: the reduced gradient is a sum.
  const double scale = static_cast<double>(grad_scale) / world_size_;
  StepResult result;
  result.grad_norm = std::sqrt(sum_sq) * std::fabs(scale);
  if (!std::isfinite(result.grad_norm)) {
    ZeroGradients();
    result.skipped = true;
    result.step = step_;
    ZS_RETURN_IF_ERROR(EndStepOrders());
    return result;
  }
  if (options_.max_grad_norm > 0.0f) {
    result.clip_coef = ClipCoefficient(options_.max_grad_norm, result.grad_norm);
  }
  ++step_;
  const absl::Status updated = UpdateShards(static_cast<float>(scale * result.clip_coef));
  ZeroGradients();
  ZS_RETURN_IF_ERROR(updated);
  ZS_RETURN_IF_ERROR(EndStepOrders());
  result.step = step_;
  return result;
}

}  // namespace zeroshard
