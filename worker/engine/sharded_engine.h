// ShardedEngine: owns every unit's parameters, gradients and AdamW state for
// one rank, applies a ZeRO stage (Rajbhandari et al., SC'20; PyTorch FSDP,
// Zhao et al., VLDB'23), and exposes the UnitHooks the model calls
// (shared/DESIGN.md "Step at each stage").
//
// It composes three parts by role, each testable without a model, over
// the units and one CollectiveTracker (collective_tracker.h: waits, stream
// ordering, failed buffers):
//   GatherScheduler (gather_scheduler.h): stage 3's gathers: window,
//     prefetch, settle, free, the recorded order;
//   GradientReducer (gradient_reducer.h): the brackets' gradients, the
//     reduce bucket, reduce-scatter or all-reduce in flight;
//   ShardUpdater (shard_updater.h): norm, clip, and the update through the
//     optimizer store.
// The engine keeps the hooks, the step's sequence, the state's access and
// the memory check.
//
// How it works, per unit u with padded size P and shard size S = P / N
// (common/shard_plan.h), compute dtype c, reduce dtype g:
//   stage 0: full compute copy (P, c) and full gradient (P, g) resident;
//            step(): all-reduce the gradient, every rank updates all P
//            elements (master, m, v over P).
//   stage 1: as 0, but master/m/v cover only the rank's shard; step():
//            reduce-scatter the gradient in place, update the shard, writing
//            the compute copy straight into the rank's slice of the full
//            buffer, then all-gather that buffer in place.
//   stage 2: full compute copy resident; the model's gradient lives in a
//            transient fp32 buffer per backward bracket; PostBackward
//            reduce-scatters it (asynchronously, one in flight while the next
//            unit's backward runs) into a resident shard gradient (S, g):
//            the step's first one of a unit writes it, later ones add the
//            rank's slice (Unit::grads_zero). step(): update, all-gather as
//            stage 1.
//   stage 3: only the shard compute copy (S, c) is resident, and it is the
//            all-gather input the optimizer writes. PreForward/PreBackward
//            all-gather the unit into a transient buffer freed at the
//            matching Post* call, and prefetch (async Work) the next
//            EngineOptions::prefetch units of the order the model opened
//            units in during the previous step (FSDP2's recorded order,
//            common/gather_order.h; the first step assumes forward 0..U-1,
//            backward U-1..0), so gathers overlap compute. A unit expected
//            again within that distance (the GPT's tied embedding/head) stays
//            gathered across its Post*; a prefetch the model did not take is
//            freed once it leaves the window. Gathered units are at most the
//            open ones plus that window, so the transient bound is
//            (1 + prefetch) units' gathers plus one bracket's gradient and
//            one in-flight reduce-scatter (GatherBufferBound). Gradients as
//            stage 2.
//   buckets (EngineOptions::bucket_bytes > 0, stages 2-3): small units share
//            collectives, as DeepSpeed's prefetch and reduce buckets and
//            DDP's gradient buckets: the recorded order is cut into buckets
//            of units whose gathered bytes fit bucket_bytes
//            (GatherOrder::SetBuckets), each all-gathered as one grouped
//            collective (Communicator::AllGatherGroup), and `prefetch`
//            counts buckets (the window is the rest of the open unit's bucket
//            plus the next `prefetch`); closed brackets' gradients wait in a
//            reduce bucket until their bytes reach bucket_bytes (or Step),
//            then go in one grouped reduce-scatter. A unit whose gradient
//            still waits there when its next backward bracket opens (the
//            tied unit's second use, the next micro-batch) adds into the
//            same buffer, so it is reduced once. The transient bound counts
//            buckets where it counted units, plus the gradients waiting in
//            the reduce bucket (under bucket_bytes: a full one goes at once).
// Gradients add over brackets and micro-batches until step(), which also
// averages over ranks (sum / N), clips by the global norm (clip coefficient
// min(1, max_norm / (norm + 1e-6)), as torch.nn.utils.clip_grad_norm_; norm
// from every rank's shard, one scalar all-reduce) and runs the fused AdamW
// (worker/optim/adamw.h) on the shard.
//
// Device: every buffer is memory of EngineOptions::device (the CPU, or one
// CUDA GPU), allocated, converted, reduced and updated only through it
// (worker/device/device.h), so the same engine code runs on both. Device
// work is ordered on the device's stream. Collectives whose backend can
// complete on that stream (NCCL) do so ([Note: stream-ordered collectives],
// communicator.h): the host never waits for them in the hooks, and checks
// them all at once before it reads the squared-norm scalar in Step and
// before state crosses to the host. Host-completed backends (Gloo,
// host-staged) are waited where their result is first used. Otherwise the
// host blocks where it must: on the squared-norm scalar, and where state
// crosses to the host (GatherFullParams, CopyOptimizerState,
// LoadShardState). Pointers the hooks hand out are device memory.
//
// Optimizer state: master weights, m and v of each unit live in an
// OptimizerStore (worker/offload/optimizer_store.h, EngineOptions::offload):
// device memory by default, or host memory / NVMe files, which Step streams
// in unit order (unit u+1 read while u is updated, u-1 written back) with
// bit-equal results; the offloaded bytes are memory().offloaded and only
// the staging slots count as optimizer memory.
//
// Parameter offload (stage 3, EngineOptions::params_offload, --offload-params
// nvme): the resident shard compute copy is replaced by a ParamStore
// (worker/offload/param_store.h), one file per unit. IssueGathers copies
// u's shard from its staging slot into the rank's slice of the gather
// buffer and all-gathers in place, after asking the store to read ahead the
// next `prefetch` units of the gather order (gather_order.h); the update and
// RebuildComputeCopy write each new shard into a slot, written back in the
// background. Resident parameter bytes are the slots (kParams), the files
// kOffloaded; results are bit-equal.
//
// Mixed precision: master weights, m and v are fp32 and exist only for the
// optimizer range (the shard; all of P at stage 0). With bf16 compute the
// model still sees fp32: the engine up-converts into a transient fp32 view
// per bracket (counted as buffers). Gradients are stored and reduced in the
// reduce dtype; the model always adds into fp32.
//
// [Note: gather buffer lifetime] Pointers returned by PreForward and
// PreBackward stay valid until the matching Post* call for that unit (the
// last one, if brackets of one unit nest); step() frees every transient.
//
// Collectives: every hook and Step may issue collectives, so every rank must
// make the same sequence of hook calls (the same model code does). Errors
// from communication cannot be returned by a hook: the engine keeps the
// first one (status()), aborts the communicator (the generation is broken),
// stops issuing collectives, hands out zero-filled buffers so the model can
// unwind, and Step returns it.
//
// Thread safety: not thread-safe; one training thread calls everything.
// memory()/peak_memory() may be read from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/dtype.h"
#include "common/gather_order.h"
#include "common/reduce_bucket.h"
#include "common/shard_plan.h"
#include "common/zero_stage.h"
#include "worker/comm/communicator.h"
#include "worker/device/device.h"
#include "worker/device/device_buffer.h"
#include "worker/device/memory_accounting.h"
#include "worker/engine/collective_tracker.h"
#include "worker/engine/engine_context.h"
#include "worker/engine/engine_options.h"
#include "worker/engine/gather_scheduler.h"
#include "worker/engine/gradient_reducer.h"
#include "worker/engine/shard_updater.h"
#include "worker/engine/unit_hooks.h"
#include "worker/offload/optimizer_store.h"
#include "worker/offload/param_store.h"
#include "worker/optim/adamw.h"

namespace zeroshard {

// The optimizer state one rank holds for a unit: `range` of the unit's
// padded flat buffer ([Note: optimizer range] in common/shard_plan.h), in
// device memory (host memory on the CPU device). With an offloaded store
// (EngineOptions::offload) the pointers are null: use CopyOptimizerState.
struct OptimizerShardView {
  ElementRange range;
  const float* master = nullptr;  // range.length fp32 elements each.
  const float* m = nullptr;
  const float* v = nullptr;
  // The view of `sub`, which must lie inside `range` (ZS_CHECK).
  OptimizerShardView Slice(ElementRange sub) const;
};

class ShardedEngine final : public UnitHooks {
 public:
  // `initial_units[u]` holds unit u's plan.units[u].numel fp32 values (flat
  // layout of the plan), identical on every rank; the engine copies what its
  // stage needs. `comm` must outlive the engine and have
  // world_size == plan.world_size. Errors: INVALID_ARGUMENT naming the field
  // (stage, dtypes, hyperparameters, timeout, unit count or sizes, world size).
  static absl::StatusOr<std::unique_ptr<ShardedEngine>> Create(
      const ShardPlan& plan, Communicator* comm, const EngineOptions& options,
      const std::vector<std::vector<float>>& initial_units);
  // The same with each unit's initial values made on demand, one unit at a
  // time (`init(u, values)` fills plan.units[u].numel values): a worker
  // never holds the whole model (a model directory's weights come later, by
  // restore). `init`'s error is Create's.
  using UnitInit = std::function<absl::Status(int unit, std::vector<float>* values)>;
  static absl::StatusOr<std::unique_ptr<ShardedEngine>> Create(const ShardPlan& plan,
                                                               Communicator* comm,
                                                               const EngineOptions& options,
                                                               const UnitInit& init);
  // Waits (bounded by the collective timeout) for collectives still using
  // engine buffers; if one cannot finish, or one failed earlier, aborts the
  // communicator and leaks those buffers rather than free memory a backend
  // may still write ([Note: failed collective buffers]).
  ~ShardedEngine() override;
  ShardedEngine(const ShardedEngine&) = delete;
  ShardedEngine& operator=(const ShardedEngine&) = delete;

  // UnitHooks (unit_hooks.h). Unit indices out of range are a ZS_CHECK.
  const float* PreForward(int unit) override;
  void PostForward(int unit) override;
  UnitBackwardView PreBackward(int unit) override;
  void PostBackward(int unit) override;

  // Forward-only passes (evaluation) between the two: their units' order is
  // recorded apart from the training step's, so neither mispredicts the
  // other, and EndEvaluation leaves nothing gathered (it waits for the
  // prefetches still in flight). Every rank calls both at the same point.
  // BeginEvaluation with a bracket open, or twice, is a ZS_CHECK.
  // EndEvaluation errors: FAILED_PRECONDITION if a bracket is still open
  // (the evaluation ends anyway); the first communication error.
  void BeginEvaluation();
  absl::Status EndEvaluation();

  // Reduces the accumulated gradients, clips, and applies one AdamW update.
  // grad_scale multiplies the gradient first (1 / micro-batches, loss-scale
  // unscaling); the engine then divides by N. Collective. Errors:
  // FAILED_PRECONDITION if a bracket is open or compute copies await
  // RebuildComputeCopy; the first communication error otherwise.
  absl::StatusOr<StepResult> Step(float grad_scale = 1.0f);

  // The first communication error, or OK.
  absl::Status status() const { return tracker_.status(); }
  int rank() const { return rank_; }

  // Unit u's fp32 master values, numel elements, unpadded (tests, export,
  // checkpoints). Collective at stages 1-3 (an all-gather): every rank calls
  // it for the same units in the same order. Errors: as Step.
  absl::StatusOr<std::vector<float>> GatherFullParams(int unit);

  // The optimizer state held for `unit`, in device memory (null pointers
  // when offloaded; `range` always).
  OptimizerShardView OptimizerShard(int unit) const;
  // Copies `sub` (inside OptimizerShard(unit).range; INVALID_ARGUMENT
  // otherwise) of master, m and v into host memory (sub.length floats
  // each), for checkpoint save; returns when the copies have landed.
  absl::Status CopyOptimizerState(int unit, ElementRange sub, float* master, float* m, float* v);
  // Replaces that state (checkpoint restore); spans must have
  // OptimizerShard(unit).range.length elements (INVALID_ARGUMENT otherwise),
  // except m and v, which may be empty: zeros. Then call RebuildComputeCopy
  // on every rank before the next hook.
  absl::Status LoadShardState(int unit, absl::Span<const float> master, absl::Span<const float> m,
                              absl::Span<const float> v);
  // Unit u's master shard as writable host memory where the optimizer state
  // is resident in this process's RAM (the CPU device, not offloaded):
  // OptimizerShard(u).range.length floats, which a restore may write in
  // place and then pass to LoadShardState. nullptr otherwise (a GPU's
  // memory, host or NVMe offload): restore through host arrays.
  float* HostMaster(int unit);
  // Rewrites every compute copy from the master weights. Collective at
  // stages 1 and 2 (all-gathers); local otherwise.
  absl::Status RebuildComputeCopy();

  // AdamW steps taken (bias correction uses step + 1 next).
  int64_t optimizer_step() const { return step_; }
  void set_optimizer_step(int64_t step) { step_ = step; }

  MemoryBytes memory() const { return accountant_.current(); }
  MemoryBytes peak_memory() const { return accountant_.peak(); }
  void ResetPeakMemory() { accountant_.ResetPeak(); }
  // Upper bound on buffers bytes while the model brackets one unit at a time
  // (plus the prefetch window, the waiting reduce bucket and one in-flight
  // reduce-scatter; windows and reductions by bucket with buckets), Step and
  // GatherFullParams included: the "gather buffers" of the stage-3 formula.
  int64_t BufferBytesBound() const;
  CommStats comm_stats() const { return comm_->stats(); }
  Device& device() const { return *device_; }
  const ShardPlan& plan() const { return plan_; }
  const EngineOptions& options() const { return options_; }
  // What options().stage shards and when (common/zero_stage.h).
  const ZeroStage& zero_stage() const { return ZeroStageOf(options_.stage); }
  // Whether the backward passes until the next Step are its last
  // micro-batch (DDP's require_backward_grad_sync): stages 0-1 then
  // all-reduce (reduce-scatter) each unit's gradient as its backward ends,
  // overlapping the rest of the backward (gradient_reducer.h). Default
  // false: at Step, one reduction per unit. Set it for the last micro-batch only: set on an
  // earlier one it costs that micro-batch's traffic. Results are the same.
  void set_gradient_sync(bool sync) { reducer_->set_sync(sync); }
  // The learning rate the next Step uses (schedules change it every step).
  void set_learning_rate(float lr) { options_.adamw.lr = lr; }

 private:
  ShardedEngine(const ShardPlan& plan, Communicator* comm, const EngineOptions& options);
  std::vector<int64_t> OptimizerSizes() const;  // opt_range lengths.
  absl::Status InitStore();                     // The optimizer and parameter stores.
  absl::Status InitParts();                     // The parts, over the stores.
  absl::Status InitUnit(int u, const std::vector<float>& initial);
  // Unit u's master weights in device memory: the store's own, or a copy
  // into `staging` (kBuffers) when offloaded.
  absl::StatusOr<const float*> MasterOnDevice(int u, DeviceBuffer& staging);
  absl::Status RebuildUnit(int u, DeviceBuffer& staging, std::vector<IssuedWork>& gathers);
  absl::Status CheckFits() const;

  // Hook machinery (engine_hooks.cc).
  EngineUnit& At(int unit);
  const float* AcquireParams(int u);
  void ReleaseParams(int u);
  // Every reduce-scatter sent and completed, every gather settled and freed.
  absl::Status DrainAll();
  bool Failed() const { return tracker_.failed(); }
  int64_t cbytes() const { return DTypeSize(options_.compute_dtype); }

  ShardPlan plan_;
  Communicator* comm_;
  EngineOptions options_;
  std::unique_ptr<Device> owned_device_;  // When options.device is null.
  Device* device_ = nullptr;
  Communicator* control_comm_ = nullptr;
  int rank_ = 0;
  int world_size_ = 1;
  MemoryAccountant accountant_;
  CollectiveTracker tracker_;
  std::vector<EngineUnit> units_;
  EngineContext ctx_;                    // Over the fields above, for the parts.
  std::unique_ptr<OptimizerStore> opt_;  // Master, m, v of every unit.
  std::unique_ptr<ParamStore> params_;   // Stage-3 compute shards, with params offload.
  // The parts (created with the stores): stage 3's gathers, the
  // gradients' reduction, the step's update.
  std::unique_ptr<GatherScheduler> gathers_;
  std::unique_ptr<GradientReducer> reducer_;
  std::unique_ptr<ShardUpdater> updater_;
  int64_t step_ = 0;
  bool compute_copy_stale_ = false;
};

}  // namespace zeroshard
