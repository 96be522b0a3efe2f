#include "worker/trainer/checkpointing.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "worker/checkpoint/reshard.h"
#include "worker/comm/control_collectives.h"

namespace zeroshard {
namespace {

// The slice of the engine's optimizer state this rank uploads (its shard:
// at stage 0 the engine holds every element but a rank sends only its slice,
// so the ranks share the upload), copied to host memory in `host` (master,
// m, v back to back per unit), and views of it. The engine's state may be
// device memory; SaveAsync snapshots the views before it returns.
absl::StatusOr<std::vector<checkpoint::UnitShardView>> ShardViews(
    ShardedEngine& engine, int rank, std::vector<std::vector<float>>* host) {
  const ShardPlan& plan = engine.plan();
  const std::vector<ElementRange> ranges = checkpoint::SaveRanges(plan, rank);
  std::vector<checkpoint::UnitShardView> views;
  host->resize(plan.units.size());
  for (size_t u = 0; u < plan.units.size(); ++u) {
    const size_t n = static_cast<size_t>(ranges[u].length);
    std::vector<float>& buf = (*host)[u];
    buf.resize(3 * n);
    ZS_RETURN_IF_ERROR(engine.CopyOptimizerState(static_cast<int>(u), ranges[u], buf.data(),
                                                 buf.data() + n, buf.data() + 2 * n));
    views.push_back(
        {plan.units[u].name, ranges[u], buf.data(), buf.data() + n, buf.data() + 2 * n});
  }
  return views;
}

}  // namespace

absl::StatusOr<std::unique_ptr<checkpoint::SaveHandle>> StartCheckpointSave(
    const GenerationContext& ctx, ShardedEngine& engine, int64_t step) {
  checkpoint::SaveMetadata meta;
  meta.job_id = ctx.session->job_id();
  meta.step = step;
  meta.rank = ctx.rank;
  meta.stage = ctx.job->stage;
  meta.plan = engine.plan();
  // The whole job config (it names the model preset), so an export or a
  // resume knows what produced the weights.
  meta.model_config_json = ctx.job->ToJson();
  meta.optimizer_step = engine.optimizer_step();
  meta.data_cursor = step * ctx.job->global_batch;
  meta.attempt = ctx.generation;  // A restarted save replaces a cut-off one.
  std::vector<std::vector<float>> host;
  ZS_ASSIGN_OR_RETURN(const std::vector<checkpoint::UnitShardView> views,
                      ShardViews(engine, ctx.rank, &host));
  return ctx.checkpoints->SaveAsync(meta, views, absl::Now() + ctx.job->checkpoint_timeout());
}

namespace {

// Rank 0's side of AgreeOnRestoreStep.
absl::StatusOr<int64_t> ChooseRestoreStep(const GenerationContext& ctx) {
  v1::GetJobStatusRequest request;
  request.set_job_id(ctx.session->job_id());
  ZS_ASSIGN_OR_RETURN(const v1::JobStatus status, ctx.session->client().GetJobStatus(request));
  const bool job_start = status.step() == 0;
  const bool resume = job_start && ctx.job->resume;
  if (job_start && !resume) return -1;
  std::optional<int64_t> step;
  if (resume && ctx.job->resume_step >= 0) step = ctx.job->resume_step;
  auto info =
      ctx.checkpoints->GetInfo(ctx.session->job_id(), step, absl::Now() + ctx.job->rpc_timeout());
  if (info.ok()) return info->summary().step();
  if (absl::IsNotFound(info.status()) && !resume) return -1;  // Nothing saved yet.
  // A coordinator without a checkpoint service holds no checkpoint either:
  // mid-job, go on from the initial weights rather than end the job.
  if (absl::IsUnimplemented(info.status()) && !resume) {
    std::cout << "the coordinator serves no checkpoints (" << info.status().message()
              << "); starting again from step 0\n"
              << std::flush;
    return -1;
  }
  return info.status();
}

// [Note: restore decision encoding] A failed decision travels as
// kFailedBase - code, so every rank returns rank 0's status code (a
// transient error leads all of them to the next generation, a permanent one
// ends all of them) and no rank invents a reason of its own.
constexpr int64_t kFailedBase = -1000;

}  // namespace

absl::StatusOr<int64_t> AgreeOnRestoreStep(const GenerationContext& ctx, Communicator& comm) {
  if (ctx.checkpoints == nullptr) return -1;  // Same job config on every rank.
  int64_t decision = -1;
  absl::Status failure;
  if (ctx.rank == 0) {
    auto chosen = ChooseRestoreStep(ctx);
    if (!chosen.ok()) failure = chosen.status();
    decision = chosen.ok() ? *chosen : kFailedBase - static_cast<int64_t>(failure.code());
  }
  ZS_ASSIGN_OR_RETURN(
      const std::vector<int64_t> agreed,
      BroadcastControl(comm, std::vector<int64_t>{decision}, 0, ctx.job->collective_timeout()));
  decision = agreed[0];
  if (decision > kFailedBase) return decision;
  if (ctx.rank == 0) return failure;
  const auto code = static_cast<absl::StatusCode>(kFailedBase - decision);
  // NOT_FOUND has one cause (ChooseRestoreStep): nothing to resume from.
  // Whichever rank's exit is seen first, it must say so.
  if (code == absl::StatusCode::kNotFound) {
    return absl::NotFoundError("rank 0 found no committed checkpoint to resume from (see its log)");
  }
  return absl::Status(code, absl::StrCat("rank 0 could not choose the checkpoint to restore (",
                                         absl::StatusCodeToString(code), "; see its log)"));
}

absl::Status RestoreModelWeights(const GenerationContext& ctx, ShardedEngine& engine) {
  if (ctx.checkpoints == nullptr) {
    return absl::FailedPreconditionError(
        "model weights come through the checkpoint service, "
        "and the job has no checkpoint directory");
  }
  const absl::Time deadline = absl::Now() + ctx.job->checkpoint_timeout();
  const ShardPlan& plan = engine.plan();
  // Each unit's weights land in the engine's own master shard where it is
  // host memory (no second copy, no fresh pages to fault in), in a host
  // array otherwise.
  std::vector<std::vector<float>> staged(plan.units.size());
  std::vector<absl::Span<const float>> master(plan.units.size());
  std::vector<checkpoint::RestoreTarget> targets;
  for (size_t u = 0; u < plan.units.size(); ++u) {
    const ElementRange range = engine.OptimizerShard(static_cast<int>(u)).range;
    float* dst = engine.HostMaster(static_cast<int>(u));
    if (dst == nullptr) {
      staged[u].resize(range.length);
      dst = staged[u].data();
    }
    master[u] = absl::MakeConstSpan(dst, range.length);
    targets.push_back({plan.units[u].name, v1::TENSOR_KIND_MASTER, range, dst});
  }
  ZS_RETURN_IF_ERROR(
      ctx.checkpoints->RestoreModelWeights(ctx.session->job_id(), plan, targets, deadline));
  for (size_t u = 0; u < plan.units.size(); ++u) {  // m and v start at zero.
    ZS_RETURN_IF_ERROR(engine.LoadShardState(static_cast<int>(u), master[u], {}, {}));
    std::vector<float>().swap(staged[u]);  // Each unit's host copy goes once it is loaded.
  }
  ZS_RETURN_IF_ERROR(engine.RebuildComputeCopy());
  engine.set_optimizer_step(0);
  return absl::OkStatus();
}

absl::Status RestoreCheckpoint(const GenerationContext& ctx, ShardedEngine& engine, int64_t step) {
  const absl::Time deadline = absl::Now() + ctx.job->checkpoint_timeout();
  ZS_ASSIGN_OR_RETURN(const v1::CheckpointInfo info,
                      ctx.checkpoints->GetInfo(ctx.session->job_id(), step, deadline));
  const ShardPlan& plan = engine.plan();
  std::vector<std::vector<float>> master(plan.units.size()), m(plan.units.size()),
      v(plan.units.size());
  std::vector<checkpoint::RestoreTarget> targets;
  for (size_t u = 0; u < plan.units.size(); ++u) {
    const ElementRange range = engine.OptimizerShard(static_cast<int>(u)).range;
    master[u].resize(range.length);
    m[u].resize(range.length);
    v[u].resize(range.length);
    const std::string& name = plan.units[u].name;
    targets.push_back({name, v1::TENSOR_KIND_MASTER, range, master[u].data()});
    targets.push_back({name, v1::TENSOR_KIND_EXP_AVG, range, m[u].data()});
    targets.push_back({name, v1::TENSOR_KIND_EXP_AVG_SQ, range, v[u].data()});
  }
  ZS_RETURN_IF_ERROR(ctx.checkpoints->Restore(info, plan, targets, deadline));
  for (size_t u = 0; u < plan.units.size(); ++u) {
    ZS_RETURN_IF_ERROR(engine.LoadShardState(static_cast<int>(u), master[u], m[u], v[u]));
  }
  ZS_RETURN_IF_ERROR(engine.RebuildComputeCopy());
  engine.set_optimizer_step(info.trainer().optimizer_step());
  return absl::OkStatus();
}

}  // namespace zeroshard
