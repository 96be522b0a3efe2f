// Helpers for tests of held training state (worker/trainer/live_reshard.h,
// peer_replica.h): engines over the test MLP trained on a fixed data
// stream, and the whole state assembled from snapshots as the reference.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/engine/engine_runner.h"
#include "worker/trainer/live_reshard.h"

namespace zeroshard::testing {

inline const MlpDims kHeldDims{5, 9};

// Trains `count` steps from step `first`: this rank's 12 / n samples a step.
void TrainSteps(ShardedEngine& engine, int rank, int n, int first, int count);

// An engine over kHeldDims at `stage`, alignment 2, initialised from `seed`.
absl::StatusOr<std::unique_ptr<ShardedEngine>> HeldTestEngine(Communicator* comm, int stage,
                                                              uint32_t seed);

// The whole state per unit (master, m, v over padded_numel), zero padded.
struct FullState {
  std::vector<std::vector<float>> master, m, v;
};
// Lays the snapshots' units end to end over `old_plan`.
FullState AssembleState(const std::vector<HeldState>& held, const ShardPlan& old_plan);

// Every element of the engine's optimizer ranges equals `want` bit for bit
// (zero past numel); a gtest failure naming `what` otherwise.
void ExpectStateMatches(const FullState& want, ShardedEngine& engine, const std::string& what);

}  // namespace zeroshard::testing
