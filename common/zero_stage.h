// What each ZeRO stage shards and when its collectives run, as one table
// (Rajbhandari et al., 2020, "ZeRO: Memory Optimizations Toward Training
// Trillion Parameter Models", section 5: P_os, P_os+g, P_os+g+p; stage 0 is
// plain data parallelism). The engine, the memory and traffic models, the
// run planner, live resharding and peer redundancy ask this table what a
// stage does; none of them tests a stage number. A new variant (hybrid
// sharding, ZeRO++'s hpZ) is a row here plus the code its new answers need.
//
// Thread safety: the table is immutable; every function is thread-safe.
#pragma once

#include <span>

namespace zeroshard {

// When a stage sums the ranks' gradients.
enum class GradReduction {
  kAllReduceAtStep,          // Each unit's whole gradient, at the step: every rank gets the sum.
  kReduceScatterAtStep,      // The whole gradient is kept through backward; at the step a
                             // reduce-scatter in place leaves each rank its slice of the sum.
  kReduceScatterInBackward,  // Bucket by bucket as backward produces them; each rank keeps
                             // only its shard of the sum between hooks.
};

struct ZeroStage {
  int number = 0;
  // AdamW's state and the fp32 master weights: each rank holds and updates
  // only its shard (P_os). Without it every rank updates everything.
  bool shards_optimizer = false;
  // The gradients kept between hooks are the rank's shard (P_g), not the
  // unit's whole gradient.
  bool shards_grads = false;
  // The compute copy of the parameters is the rank's shard (P_p): a unit is
  // all-gathered before its forward/backward use (with prefetch) and freed
  // after, and checkpoints/offload may keep parameters as shards only.
  bool shards_params = false;
  GradReduction reduction = GradReduction::kAllReduceAtStep;
  // The whole compute copy stays resident and each rank's updated slice is
  // all-gathered into it after the step (stages 1-2).
  bool gathers_after_step = false;

  // Whether each rank holds every element of the optimizer's state (and so
  // of the master weights): the stage shards nothing a rank could lose.
  bool replicated() const { return !shards_optimizer; }
};

// Stages 0, 1, 2 and 3, in order.
std::span<const ZeroStage> ZeroStages();
// Whether `stage` is a row (the callers' validation names the field).
bool IsZeroStage(int stage);
// The row of `stage`, which must have passed IsZeroStage (else the process
// aborts with the number: a caller's bug, never input).
const ZeroStage& ZeroStageOf(int stage);

}  // namespace zeroshard
