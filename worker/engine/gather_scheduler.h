// Stage 3's parameter gathers for one rank's engine (sharded_engine.h):
// which units are all-gathered when, and when their gathered copies are
// freed. PyTorch FSDP2's recorded-order prefetch (Zhao et al., VLDB'23,
// section 3.3) with DeepSpeed-style buckets:
// - the order the model opens units in is recorded each step
//   (common/gather_order.h); the next step prefetches the next
//   EngineOptions::prefetch buckets of that order (the first step assumes
//   forward 0..U-1, backward U-1..0);
// - a unit expected again within the window stays gathered across its
//   closing hook; a prefetch the model did not take is freed once it leaves
//   the window, so at most (1 + prefetch) buckets are gathered;
// - a bucket is one grouped all-gather (Communicator::AllGatherGroup);
// - with parameter offload (a ParamStore), each unit's shard is staged from
//   the store into the rank's slice of its gather buffer, and the store
//   reads ahead the units gathered next.
// Evaluation records its own order, so neither mispredicts the other.
//
// Testable without a model: units, a device and a communicator suffice
// (tests/engine/engine_parts_test.cc).
//
// Thread safety: the engine's training thread only.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/gather_order.h"
#include "worker/engine/collective_tracker.h"
#include "worker/engine/engine_context.h"
#include "worker/offload/param_store.h"

namespace zeroshard {

class GatherScheduler {
 public:
  // `params`: the stage-3 parameter store with params offload, else null.
  GatherScheduler(const EngineContext& ctx, ParamStore* params);

  // Unit u opens (its first Pre* hook, stage 3): records it, frees gathered
  // units outside the window, gathers u with the rest of its bucket unless
  // it is gathered, then the window's next buckets, and orders u's gather
  // before its use. Returns u's gathered compute copy (zeros after a
  // failure: the model unwinds, the tracker keeps the error).
  const void* Open(int u);
  // Whether u's gathered copy stays across its closing hook: stage 3 and
  // the order expects u within the prefetch window.
  bool KeepGathered(int u) const;
  // Unit u's last bracket closed: frees its gathered copy unless a gather
  // is in flight into it or KeepGathered.
  void Close(int u);
  // Waits for any gather in flight into every unit and frees those not open.
  void FreeAll();

  // Evaluation's order in place of training's, and back; EndEvaluation
  // ends the evaluation's recorded order.
  void BeginEvaluation();
  void EndEvaluation();
  // The store reads ahead the first units of the training order's gathers.
  absl::Status PrefetchTrainingOrder();
  // The step ended: the orders recorded become the next step's, and the
  // store reads ahead the first units of its gathers.
  absl::Status EndStep();
  // Teardown: waits up to `wait` for gathers in flight; false if one did
  // not finish or had failed. Their buffers are then the tracker's.
  bool Settle(absl::Duration wait);

 private:
  struct Orders {
    // `use`: the order the model opens units in (the all-gather prefetch);
    // `gather`: the order of the all-gathers (the store's read-ahead).
    GatherOrder use, gather;
  };
  // One all-gather of `group`'s units (distinct, none gathered).
  void IssueGathers(const std::vector<int>& group);
  void GatherWindow(int u);
  // Orders unit's gather before its use (on the stream where the backend
  // can, else by a host wait); false when it failed (its buffer retired).
  bool SettleGather(EngineUnit& unit, bool on_stream);
  void FreeGather(EngineUnit& unit);
  // Unit u's shard from the store into `dst` (device memory).
  absl::Status StageParamShard(int u, void* dst);

  EngineContext ctx_;
  ParamStore* params_;
  Orders train_orders_, eval_orders_;
  Orders* orders_ = &train_orders_;
};

}  // namespace zeroshard
