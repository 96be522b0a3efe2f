// The gradients of one rank's engine (sharded_engine.h): where the model
// adds each backward bracket's gradient, and how the ranks' gradients are
// summed, per ZeroStage::reduction (common/zero_stage.h):
// - kAllReduceAtStep (stage 0) and kReduceScatterAtStep (stage 1): the
//   model adds into the resident full gradient (fp32 reduce dtype) or into
//   an fp32 bracket buffer added to it at close; at the step each unit's
//   gradient is all-reduced, or reduce-scattered in place;
// - stages 0-1 overlapped (fp32 reduce dtype, N > 1): in the step's last
//   micro-batch (set_sync, DDP's require_backward_grad_sync) each unit's
//   gradient is all-reduced (stage 0) or reduce-scattered (stage 1) in
//   place as soon as its last backward bracket of the step closes, while
//   the backward goes on (DDP's buckets; a unit here is a bucket). Which close is the last is
//   learnt from the step before (a tied unit closes twice; the first step sends nothing early, so
//   each unit is still all-reduced once, whole, and the sums equal the step-time ones to the bit);
//   a bracket that opens after its unit's all-reduce went out (the pattern changed) gets its own
//   buffer, all-reduced apart and added (sums are linear), so a wrong guess costs traffic and
//   rounding, never correctness. Units no backward closed are all-reduced at the step;
// - kReduceScatterInBackward (stages 2-3): each closed bracket's fp32
//   gradient waits in a reduce bucket (common/reduce_bucket.h; DDP's
//   bucket_cap_mb, DeepSpeed's reduce bucket) until its bytes reach
//   bucket_bytes, then goes in one grouped reduce-scatter, one in flight
//   while the next bucket's backward runs; the rank's slice lands in its
//   shard gradient (written directly when that still counts as zeros,
//   EngineUnit::grads_zero; added otherwise). A unit whose gradient still
//   waits when its next bracket opens adds into the same buffer, so it is
//   reduced once.
//
// Testable without a model: units, a device and a communicator suffice
// (tests/engine/engine_parts_test.cc).
//
// Thread safety: the engine's training thread only.
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/reduce_bucket.h"
#include "worker/engine/collective_tracker.h"
#include "worker/engine/engine_context.h"

namespace zeroshard {

class GradientReducer {
 public:
  explicit GradientReducer(const EngineContext& ctx);

  // Whether the backward passes until the step are its last micro-batch:
  // stages 0-1 then reduce each unit as its backward ends. Default false:
  // at the step, one all-reduce (reduce-scatter) per unit. Results are the
  // same either way.
  void set_sync(bool sync) { sync_ = sync; }

  // Unit u's first backward bracket opens: the fp32 buffer (padded_numel
  // floats) the model adds its gradient into.
  float* Open(int u);
  // Unit u's last backward bracket closed: its gradient goes toward the
  // resident one (stages 0-1) or into the reduce bucket (stages 2-3).
  void Close(int u);
  // Sends the reduce bucket's waiting gradients and completes every
  // reduce-scatter in flight (before the step, or evaluation's end).
  void Flush();
  // At the step, after Flush: stage 0 all-reduces and stage 1
  // reduce-scatters every unit's gradient; stages 2-3 zero-fill the shard
  // gradients no backward wrote. The first communication error.
  absl::Status ReduceAtStep();
  // The reduced gradient over unit's optimizer range (reduce dtype).
  void* ShardGrad(EngineUnit& unit) const;
  // After the step: every resident gradient counts as zeros again.
  void Zero();
  // Teardown: waits up to `wait` for reduce-scatters in flight; false if
  // one did not finish. RetirePending then hands their buffers (and the
  // shard gradients they write directly) to the tracker.
  bool Settle(absl::Duration wait);
  void RetirePending();

 private:
  struct ReducePiece {
    int unit = 0;
    DeviceBuffer staging;  // P elements of the reduce dtype, reduced in place.
    bool direct = false;   // Reduced into the unit's `grads`, not staging's slice.
  };
  struct PendingReduce {  // One (grouped) reduce-scatter, or one all-reduce, in flight.
    std::unique_ptr<Work> work;
    std::vector<ReducePiece> pieces;
    bool all_reduce = false;  // Stage 0: a piece not direct is added whole, not its slice.
  };
  // One (grouped) reduce-scatter of `units`' closed gradients (grad_view),
  // after the one in flight completes.
  void IssueReduceGroup(const std::vector<int>& units);
  void DrainOneReduce();
  // Stages 0-1 overlapped (see above).
  bool OverlapsStepReduction() const;
  void CloseForStepReduction(int u);
  // Unit u's gradient (`direct`) or its bracket buffer, all-reduced (stage
  // 0) or reduce-scattered (stage 1) in place.
  void IssueStepReduction(int u, bool direct);

  EngineContext ctx_;
  std::deque<PendingReduce> pending_;
  // Units whose closed brackets' gradients (grad_view) wait for the next
  // grouped reduce-scatter, weighed in reduce-dtype bytes.
  ReduceBucket reduce_bucket_;
  bool sync_ = false;
  // Stages 0-1 overlapped, per unit: its reduction went out this step; its
  // brackets closed this step and the step before (in sync micro-batches).
  std::vector<char> issued_;
  std::vector<int> closes_now_, closes_last_;
};

}  // namespace zeroshard
