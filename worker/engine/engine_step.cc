// ShardedEngine::Step: the sequence of one optimizer step over the parts
// (gradient reduction, norm and clip, the shard update, the orders'
// turn). See sharded_engine.h.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/engine/sharded_engine.h"
#include "worker/optim/job_adamw.h"

namespace zeroshard {

absl::StatusOr<StepResult> ShardedEngine::Step(float grad_scale) {
  for (const EngineUnit& unit : units_) {
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
  ZS_RETURN_IF_ERROR(reducer_->ReduceAtStep());
  ZS_ASSIGN_OR_RETURN(const double sum_sq, updater_->GlobalSumSquares());
  // The engine averages over ranks: the reduced gradient is a sum.
  const double scale = static_cast<double>(grad_scale) / world_size_;
  StepResult result;
  result.grad_norm = std::sqrt(sum_sq) * std::fabs(scale);
  if (!std::isfinite(result.grad_norm)) {
    reducer_->Zero();
    result.skipped = true;
    result.step = step_;
    ZS_RETURN_IF_ERROR(gathers_->EndStep());
    return result;
  }
  if (options_.max_grad_norm > 0.0f) {
    result.clip_coef = ClipCoefficient(options_.max_grad_norm, result.grad_norm);
  }
  ++step_;
  const absl::Status updated =
      updater_->Update(step_, static_cast<float>(scale * result.clip_coef));
  reducer_->Zero();
  ZS_RETURN_IF_ERROR(updated);
  ZS_RETURN_IF_ERROR(gathers_->EndStep());
  result.step = step_;
  return result;
}

}  // namespace zeroshard
