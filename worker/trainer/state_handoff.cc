#include "worker/trainer/state_handoff.h"

#include <algorithm>
#include <iostream>

#include "common/status_macros.h"
#include "worker/trainer/checkpointing.h"

namespace zeroshard {

absl::StatusOr<GenerationStart> LoadBestState(const GenerationContext& ctx,
                                              std::vector<HeldState>& held,
                                              const std::vector<UnitSpec>& units,
                                              ShardedEngine& engine, Communicator& control) {
  const absl::Duration timeout = ctx.job->collective_timeout();
  ZS_ASSIGN_OR_RETURN(const LiveState live,
                      AgreeOnLiveState(control, held, ctx.job->stage, timeout));
  if (live.live) {
    ZS_RETURN_IF_ERROR(ReshardInto(control, live, held, units, engine, timeout));
    if (ctx.replica != nullptr) {  // Until this generation's first refresh has passed.
      std::erase_if(held, [&](const HeldState& h) {
        return h.generation != live.generation || h.step != live.step;
      });
      ctx.replica->Keep(std::move(held));
    }
    held.clear();
    std::cout << "resharded live: step " << live.step << " from a plan of " << live.world_size
              << " ranks onto " << ctx.world_size << ", no checkpoint read\n"
              << std::flush;
    return GenerationStart{live.step, "resharded_live", live.step, ""};
  }
  held.clear();
  if (!live.why_not.empty()) {
    std::cout << "cannot reshard live (" << live.why_not
              << "); falling back to the latest checkpoint\n"
              << std::flush;
  }
  ZS_ASSIGN_OR_RETURN(const int64_t restore_step, AgreeOnRestoreStep(ctx, control));
  if (restore_step < 0) {
    // The seeded init the engine began with, or the model directory's weights.
    if (!ctx.job->loads_model_weights()) return GenerationStart{0, "initialized", -1, live.why_not};
    ZS_RETURN_IF_ERROR(RestoreModelWeights(ctx, engine));
    std::cout << "loaded this rank's shard of the model weights from " << ctx.job->model << "\n"
              << std::flush;
    return GenerationStart{0, "loaded_model", -1, live.why_not};
  }
  ZS_RETURN_IF_ERROR(RestoreCheckpoint(ctx, engine, restore_step));
  std::cout << "restored checkpoint at step " << restore_step << "\n" << std::flush;
  return GenerationStart{restore_step, "restored_checkpoint", restore_step, live.why_not};
}

absl::StatusOr<YieldOutcome> HandOffAtYield(const GenerationContext& ctx, const YieldInfo& y,
                                            const std::vector<UnitSpec>& units,
                                            ShardedEngine& engine, Communicator& control,
                                            std::vector<HeldState>& held) {
  const absl::Duration timeout = ctx.job->collective_timeout();
  ZS_ASSIGN_OR_RETURN(HeldState mine, SnapshotState(engine, ctx.generation, y.step));
  held.clear();
  if (y.leaving.empty()) {
    held.push_back(std::move(mine));
  } else {
    ZS_ASSIGN_OR_RETURN(std::optional<HeldState> kept,
                        HandOffToSurvivors(control, mine, y.leaving, units, timeout));
    if (kept.has_value()) held.push_back(*std::move(kept));
  }
  // Nobody ends the generation before every rank holds its part.
  const absl::Status met = control.Barrier(CollectiveOptions{timeout});
  const bool leaving = std::find(y.leaving.begin(), y.leaving.end(), ctx.rank) != y.leaving.end();
  if (!met.ok() && (leaving || held.empty())) return met;
  if (!met.ok()) {
    // The barrier failed after this survivor had its part: a leaver passed
    // the barrier and left, and the next generation's abort reached this
    // rank before its own barrier returned (seen in elastic_leave_test).
    // What it holds is complete, so it keeps it; the next generation's
    // live-state check (LoadBestState) finds out whether every shard has a
    // holder and restores a checkpoint if one has none.
    std::cout << "generation " << ctx.generation << ": the handoff's closing barrier failed ("
              << met.message() << "); keeping this rank's handed-off state\n"
              << std::flush;
    return YieldOutcome::kKept;
  }
  if (leaving) return YieldOutcome::kGaveAway;
  int first_survivor = 0;
  while (std::find(y.leaving.begin(), y.leaving.end(), first_survivor) != y.leaving.end()) {
    ++first_survivor;
  }
  return ctx.rank == first_survivor ? YieldOutcome::kKeptFirstSurvivor : YieldOutcome::kKept;
}

}  // namespace zeroshard
