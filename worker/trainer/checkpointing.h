// Glue between the engine's optimizer shard and the checkpoint client: what a
// rank saves, and how a rank restores under the current shard plan (any
// world size or stage: worker/checkpoint/reshard.h).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "worker/trainer/generation_trainer.h"

namespace zeroshard {

// Snapshots this rank's shard of master weights and AdamW moments and starts
// uploading it in the background (training may go on at once).
absl::StatusOr<std::unique_ptr<checkpoint::SaveHandle>> StartCheckpointSave(
    const GenerationContext& ctx, ShardedEngine& engine, int64_t step);

// Loads the latest committed checkpoint (or job.resume_step's) into the
// engine and returns its step; NOT_FOUND when there is none. Every rank calls
// it (RebuildComputeCopy is collective at stages 1 and 2).
absl::StatusOr<int64_t> RestoreCheckpoint(const GenerationContext& ctx, ShardedEngine& engine,
                                          bool exact_step);

}  // namespace zeroshard
