// Live resharding: moving the training state (master weights, AdamW m and v,
// the optimizer step and the data cursor) from one generation's shard plan
// to the next one's over the new generation's control communicator, with no
// checkpoint read and no step lost (issue "Elastic training without
// rollback").
//
// How it works:
// - At a clean step boundary (the ranks agreed to yield for a membership
//   change, worker/trainer/generation_trainer.h), every rank snapshots its
//   optimizer state to host memory: a HeldState tagged with the generation,
//   the plan it is sharded by (world size, alignment, stage), the rank's
//   index in that plan, and the completed step.
// - When the next generation forms, every rank all-gathers a small
//   descriptor of what it holds (AgreeOnLiveState). The state is live when
//   the holders of the newest generation agree on its plan and step and,
//   together, hold every shard of that plan. Anything else (a holder died,
//   holders disagree) is not live, and the caller falls back to the latest
//   checkpoint and says why.
// - Redistribute: a unit's parameters sit at the same element offsets in
//   every plan (only the zero padding after numel depends on the world size;
//   worker/checkpoint/reshard.h), so each old shard [a, b) ∩ [0, numel) is
//   broadcast by the rank that holds it, and every rank keeps the part that
//   falls in its new optimizer range (common/shard_plan.h, [Note: optimizer
//   range]); padding is zero. A shard that no other rank needs is copied
//   locally instead (same world size: no traffic). Traffic per rank is at
//   most the unit's 3 * numel fp32 values once, transient memory one old
//   shard.
//
// Thread safety: none; the training thread calls everything. Every function
// taking a Communicator is collective over it and must be called by every
// rank in the same order. Errors: the communicator's (UNAVAILABLE,
// DEADLINE_EXCEEDED, ABORTED: the generation is lost), INVALID_ARGUMENT for
// a held state that does not fit the model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/shard_plan.h"
#include "worker/comm/communicator.h"
#include "worker/engine/sharded_engine.h"

namespace zeroshard {

// One unit's optimizer state over `range` of its padded buffer, host memory.
struct HeldUnit {
  ElementRange range;
  std::vector<float> master, m, v;  // range.length each.
};

struct HeldState {
  uint64_t generation = 0;  // The generation whose plan shards it.
  int world_size = 0;       // That plan's.
  int64_t alignment = 1;
  int stage = 0;
  int index = -1;    // This holder's rank in that plan.
  int64_t step = 0;  // Completed training steps.
  int64_t optimizer_step = 0;
  std::vector<HeldUnit> units;  // Plan order; OptimizerRange(unit, stage, index).
};

// Copies the engine's optimizer state to host memory. The engine must be at
// a step boundary with no failure (FAILED_PRECONDITION otherwise).
absl::StatusOr<HeldState> SnapshotState(ShardedEngine& engine, uint64_t generation, int64_t step);

// What AgreeOnLiveState decided; the same on every rank.
struct LiveState {
  bool live = false;
  std::string why_not;      // When !live and some rank held state.
  uint64_t generation = 0;  // The held state's (HeldState::generation).
  int world_size = 0;       // The held plan's.
  int64_t alignment = 1;
  int stage = 0;
  int64_t step = 0;
  int64_t optimizer_step = 0;
  std::vector<int> source;       // Old index -> current rank that sends it.
  std::vector<int> source_slot;  // ... and which of that rank's held states.
};

// A rank holds at most kHeldSlots states: its own, and with peer
// redundancy its ring neighbour's, of up to two steps after a refresh cut
// short (peer_replica.h, [Note: a refresh cut short]).
inline constexpr int kHeldSlots = 4;
// This rank's descriptor row block (kHeldSlots rows) of what it holds.
std::vector<int64_t> DescribeHeld(absl::Span<const HeldState> held);
// The decision from every rank's DescribeHeld block (rank order): the
// newest (generation, step) whose holders cover every shard of their plan.
// An older generation's state is held only until the next generation's
// first refresh has passed (PeerReplica::Keep), so it is tried only when
// that generation has trained nothing. Pure, so every rank reaches the
// same one; why_not says why the newest was not live.
LiveState DecideLiveState(const std::vector<std::vector<int64_t>>& rows, int stage);

// Collective: all-gathers DescribeHeld over `control` and decides.
absl::StatusOr<LiveState> AgreeOnLiveState(Communicator& control, absl::Span<const HeldState> held,
                                           int stage, absl::Duration timeout);

// Collective: the state `live` describes (`held` empty on ranks that hold
// none) redistributed to `target_plan`, where rank r of `control` takes
// index target_index[r] (-1: none). Returns this rank's units over
// OptimizerRange(unit, live.stage, its index); empty ranges for -1.
absl::StatusOr<std::vector<HeldUnit>> Redistribute(Communicator& control, const LiveState& live,
                                                   absl::Span<const HeldState> held,
                                                   const std::vector<UnitSpec>& units,
                                                   const ShardPlan& target_plan,
                                                   const std::vector<int>& target_index,
                                                   absl::Duration timeout);

// Graceful leave, collective over the generation that holds `mine` (every
// rank at the same step): the ranks in `leaving` (ascending) give their
// shards to the others, which become a plan of N - |leaving| ranks in rank
// order. Returns the survivor's new HeldState (same generation tag), or
// nothing on a leaving rank.
absl::StatusOr<std::optional<HeldState>> HandOffToSurvivors(Communicator& control,
                                                            const HeldState& mine,
                                                            const std::vector<int>& leaving,
                                                            const std::vector<UnitSpec>& units,
                                                            absl::Duration timeout);

// Collective: moves the held state (`held` may be empty on ranks that hold
// none) into `engine` under its plan, per `live` (which must be live), then
// rebuilds the compute copy and sets the optimizer step.
absl::Status ReshardInto(Communicator& control, const LiveState& live,
                         absl::Span<const HeldState> held, const std::vector<UnitSpec>& units,
                         ShardedEngine& engine, absl::Duration timeout);

}  // namespace zeroshard
