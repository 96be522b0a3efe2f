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

// The checkpoint step every rank of the generation restores, -1 for none.
// Rank 0 decides and broadcasts it over `comm`, so ranks never disagree: at
// the job's start (the coordinator has seen no step yet) the job's
// resume / resume_step; later (a new generation mid-job) the latest
// committed checkpoint, or none if nothing was saved yet. Collective.
// NOT_FOUND when the job asks to resume and there is nothing to resume from.
absl::StatusOr<int64_t> AgreeOnRestoreStep(const GenerationContext& ctx, Communicator& comm);

// Loads checkpoint `step` into the engine: each rank downloads exactly the
// ranges it holds under the current plan. Every rank calls it
// (RebuildComputeCopy is collective at stages 1 and 2).
absl::Status RestoreCheckpoint(const GenerationContext& ctx, ShardedEngine& engine, int64_t step);

// Loads the job's model-directory weights (JobConfig::loads_model_weights)
// into the engine as master weights at optimizer step 0 with zero moments:
// each rank downloads exactly the ranges it holds under the current plan
// from the coordinator, which reads them from the safetensors a chunk at a
// time (checkpoint.proto DownloadRangeRequest.model_weights). Every rank
// calls it (RebuildComputeCopy is collective at stages 1 and 2).
absl::Status RestoreModelWeights(const GenerationContext& ctx, ShardedEngine& engine);

}  // namespace zeroshard
