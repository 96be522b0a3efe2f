// ShardedEngine::Step: gradient reduction (stages 0-1), global-norm
// clipping, the fused AdamW shard update, and the parameter all-gather
// (stages 1-2). See sharded_engine.h.
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/engine/convert.h"
#include "worker/engine/sharded_engine.h"

namespace zeroshard {

absl::StatusOr<StepResult> ShardedEngine::Step(float grad_scale) {
  for (const Unit& unit : units_) {
    if (unit.param_refs > 0 || unit.grad_refs > 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("Step called while unit '", unit.plan->name, "' is bracketed"));
    }
  }
  if (compute_copy_stale_) {
    return absl::FailedPreconditionError("Step called after LoadShardState without RebuildComputeCopy");
  }
  ZS_RETURN_IF_ERROR(DrainAll());
  const int stage = options_.stage;
  const DType gdt = options_.reduce_dtype, cdt = options_.compute_dtype;
  const CollectiveOptions copts{options_.collective_timeout};

  // 1. Reduce: all-reduce (stage 0) or reduce-scatter in place (stage 1).
  if (stage <= 1) {
    std::vector<std::unique_ptr<Work>> works;
    for (Unit& unit : units_) {
      const int64_t S = unit.plan->shard_numel;
      works.push_back(stage == 0
                          ? comm_->AllReduce(unit.grads.data(), unit.grads.data(),
                                             unit.plan->padded_numel, gdt, ReduceOp::kSum, copts)
                          : comm_->ReduceScatter(unit.grads.data(), Slice(unit.grads, S, gbytes()),
                                                 S, gdt, ReduceOp::kSum, copts));
    }
    for (std::unique_ptr<Work>& w : works) {
      if (absl::Status s = Await(w); !s.ok()) {
        for (Unit& unit : units_) Retire(unit.grads);  // [Note: failed collective buffers]
        return s;
      }
    }
  }
  // The reduced gradient over each unit's optimizer range, in gdt.
  auto shard_grad = [&](Unit& unit) -> void* {
    if (stage == 1) return Slice(unit.grads, unit.plan->shard_numel, gbytes());
    return unit.grads.data();
  };

  // 2. Global norm of the rank-averaged gradient: every rank's shard sum of
  // squares, one scalar all-reduce (at stage 0 every rank has everything).
  double sum_sq = 0.0;
  for (Unit& unit : units_) sum_sq += SumSquares(shard_grad(unit), gdt, unit.opt_range.length);
  if (stage > 0 && world_size_ > 1) {
    float local = static_cast<float>(sum_sq), global = 0.0f;
    std::unique_ptr<Work> w = comm_->AllReduce(&local, &global, 1, DType::kFp32, ReduceOp::kSum, copts);
    ZS_RETURN_IF_ERROR(Await(w));
    sum_sq = global;
  }
  const double scale = static_cast<double>(grad_scale) / world_size_;
  StepResult result;
  result.grad_norm = std::sqrt(sum_sq) * std::fabs(scale);
  auto zero_grads = [&] {
    for (Unit& unit : units_) std::memset(unit.grads.data(), 0, unit.grads.bytes());
  };
  if (!std::isfinite(result.grad_norm)) {
    zero_grads();
    result.skipped = true;
    result.step = step_;
    return result;
  }
  if (options_.max_grad_norm > 0.0f) {
    result.clip_coef = std::min(1.0, options_.max_grad_norm / (result.grad_norm + 1e-6));
  }

  // 3. Fused AdamW on the shard; the compute copy goes straight into the
  // all-gather input (the rank's slice of the full buffer at stages 1-2, the
  // resident shard at stage 3, the whole buffer at stage 0).
  ++step_;
  const float multiplier = static_cast<float>(scale * result.clip_coef);
  AccountedBuffer grad32(&accountant_, MemoryKind::kBuffers);
  std::vector<std::unique_ptr<Work>> gathers;
  for (Unit& unit : units_) {
    const int64_t n = unit.opt_range.length, S = unit.plan->shard_numel;
    const float* g = static_cast<const float*>(shard_grad(unit));
    if (gdt != DType::kFp32) {
      grad32.Allocate(n * 4);
      Bf16ToFp32(static_cast<const bf16*>(shard_grad(unit)), grad32.as<float>(), n);
      g = grad32.as<float>();
    }
    void* out = (stage == 1 || stage == 2) ? Slice(unit.params, S, cbytes()) : unit.params.data();
    AdamWCpu(options_.adamw, step_, multiplier,
             {unit.master.as<float>(), unit.m.as<float>(), unit.v.as<float>(), g, n, out, cdt},
             options_.optimizer_threads);
    grad32.Free();
    if (stage == 1 || stage == 2) {
      gathers.push_back(comm_->AllGather(out, unit.params.data(), S, cdt, copts));
    }
  }
  zero_grads();
  for (std::unique_ptr<Work>& w : gathers) ZS_RETURN_IF_ERROR(Await(w));
  result.step = step_;
  return result;
}

}  // namespace zeroshard
