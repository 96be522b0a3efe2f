// The hooks: parameter views (gathers at stage 3, through GatherScheduler)
// and gradient views (through GradientReducer). See sharded_engine.h.
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/engine/sharded_engine.h"

namespace zeroshard {

const float* ShardedEngine::AcquireParams(int u) {
  EngineUnit& unit = units_[u];
  if (unit.param_refs++ > 0) return unit.param_ptr;
  if (compute_copy_stale_) {
    tracker_.Fail(absl::FailedPreconditionError(
        "a hook ran after LoadShardState without RebuildComputeCopy"));
  }
  const int64_t P = unit.plan->padded_numel;
  const void* full = zero_stage().shards_params ? gathers_->Open(u) : unit.params.data();
  if (options_.compute_dtype == DType::kBf16) {
    ctx_.MustAllocate(unit.view, P * 4);
    tracker_.Fail(device_->Convert(full, DType::kBf16, unit.view.data(), DType::kFp32, P));
    // Stage 3: the fp32 view replaces the bf16 gather, unless u is used again soon.
    if (!gathers_->KeepGathered(u)) unit.gathered.Free();
    unit.param_ptr = unit.view.as<float>();
  } else {
    unit.param_ptr = static_cast<const float*>(full);
  }
  return unit.param_ptr;
}

void ShardedEngine::ReleaseParams(int u) {
  EngineUnit& unit = units_[u];
  ZS_CHECK(unit.param_refs > 0);  // A Post* without its Pre*.
  if (--unit.param_refs > 0) return;
  unit.view.Free();
  gathers_->Close(u);
  unit.param_ptr = nullptr;
}

const float* ShardedEngine::PreForward(int u) {
  At(u);
  return AcquireParams(u);
}

void ShardedEngine::PostForward(int u) {
  At(u);
  ReleaseParams(u);
}

UnitBackwardView ShardedEngine::PreBackward(int u) {
  EngineUnit& unit = At(u);
  const float* params = AcquireParams(u);
  if (unit.grad_refs++ == 0) unit.grad_ptr = reducer_->Open(u);
  return {params, unit.grad_ptr};
}

void ShardedEngine::PostBackward(int u) {
  EngineUnit& unit = At(u);
  ReleaseParams(u);
  ZS_CHECK(unit.grad_refs > 0);  // PostBackward without PreBackward.
  if (--unit.grad_refs > 0) return;
  unit.grad_ptr = nullptr;
  reducer_->Close(u);
}

absl::Status ShardedEngine::DrainAll() {
  reducer_->Flush();
  gathers_->FreeAll();
  return tracker_.status();
}

void ShardedEngine::BeginEvaluation() {
  for (const EngineUnit& unit : units_) ZS_CHECK(unit.param_refs == 0 && unit.grad_refs == 0);
  gathers_->BeginEvaluation();
}

absl::Status ShardedEngine::EndEvaluation() {
  gathers_->EndEvaluation();
  for (const EngineUnit& unit : units_) {
    if (unit.param_refs > 0 || unit.grad_refs > 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("EndEvaluation called while unit '", unit.plan->name, "' is bracketed"));
    }
  }
  ZS_RETURN_IF_ERROR(DrainAll());
  return gathers_->PrefetchTrainingOrder();
}

}  // namespace zeroshard
