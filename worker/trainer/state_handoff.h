// Where a generation's training state comes from and where it goes when the
// generation ends at a step boundary: the live-resharding glue between the
// worker's loop (worker_runtime.cc) and live_reshard.h.
//
// At a generation's start: the state the previous generation's ranks handed
// over, moved live to the new plan when it is complete; otherwise the
// latest committed checkpoint (or the initial weights), and the log says
// why live resharding was not possible.
// At a yield (generation_trainer.h's YieldInfo): every rank snapshots its
// state; ranks that leave give their shards to the survivors first; one
// survivor tells the coordinator the generation ended by a handoff, and a
// leaving rank sends Leave.
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

enum class YieldOutcome { kHandedOff, kLeft };

// Hands the state over at `y`: kHandedOff with `held` set on a survivor,
// kLeft on a leaving rank (after it sent Leave). A survivor whose closing
// barrier fails after it holds its part still returns kHandedOff (the next
// generation checks that every shard has a holder); any other failure is
// the error.
absl::StatusOr<YieldOutcome> HandOffAtYield(const GenerationContext& ctx, const YieldInfo& y,
                                            const std::vector<UnitSpec>& units,
                                            ShardedEngine& engine, Communicator& control,
                                            std::vector<HeldState>& held);

}  // namespace zeroshard
