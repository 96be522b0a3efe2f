// Where a generation's training state comes from and where it goes when the
// generation ends at a step boundary: the live-resharding glue between the
// worker's loop (worker_runtime.cc) and live_reshard.h.
//
// At a generation's start: the state the previous generation's ranks handed
// over, moved live to the new plan when it is complete; otherwise the
// latest committed checkpoint (or the initial weights), and the log says
// why live resharding was not possible.
// At a yield (generation_trainer.h's YieldInfo): every rank snapshots its
// state, and ranks that leave give their shards to the survivors first.
// What the ranks tell the coordinator afterwards (the first survivor
// reports the handoff, a leaving rank sends Leave) is the lifecycle's
// decision (lifecycle.h).
//
// Thread safety: the training thread only. Both functions are collective
// over `control`.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/trainer/generation_trainer.h"
#include "worker/trainer/live_reshard.h"

namespace zeroshard {

// Loads the best state into `engine` and says where it came from and the
// step to train from. `held` is consumed (cleared) once the engine has it,
// or once it is known to be incomplete.
absl::StatusOr<GenerationStart> LoadBestState(const GenerationContext& ctx,
                                              std::vector<HeldState>& held,
                                              const std::vector<UnitSpec>& units,
                                              ShardedEngine& engine, Communicator& control);

enum class YieldOutcome {
  kKept,               // A survivor holds its part (`held`).
  kKeptFirstSurvivor,  // The same, on the survivor that reports the handoff.
  kGaveAway,           // A leaving rank: its shard is with the survivors.
};

// Hands the state over at `y`. A survivor whose closing barrier fails after
// it holds its part still returns kKept, without reporting (the next
// generation checks that every shard has a holder); any other failure is
// the error.
absl::StatusOr<YieldOutcome> HandOffAtYield(const GenerationContext& ctx, const YieldInfo& y,
                                            const std::vector<UnitSpec>& units,
                                            ShardedEngine& engine, Communicator& control,
                                            std::vector<HeldState>& held);

}  // namespace zeroshard
