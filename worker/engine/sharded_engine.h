// ShardedEngine: owns every unit's parameters, gradients and AdamW state for
// one rank, applies a ZeRO stage (Rajbhandari et al., SC'20; PyTorch FSDP,
// Zhao et al., VLDB'23), and exposes the UnitHooks the model calls
// (shared/DESIGN.md "Step at each stage").
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
#include <deque>
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
#include "worker/engine/engine_options.h"
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
  absl::Status status() const { return status_; }
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
  // The learning rate the next Step uses (schedules change it every step).
  void set_learning_rate(float lr) { options_.adamw.lr = lr; }

 private:
  // One all-gather (a group of units' with buckets), shared by its units.
  struct GatherWork {
    std::unique_ptr<Work> work;  // Null once sequenced or waited.
    bool failed = false;         // Its wait failed: every member's buffer is retired.
  };
  struct Unit {
    const UnitPlan* plan = nullptr;
    ElementRange opt_range;              // Optimizer state's range of the padded buffer; its
                                         // master, m, v are opt_'s unit.
    DeviceBuffer params;                 // kParams, compute dtype: P (stages 0-2) or S (3);
                                         // empty with params offload (params_ holds it).
    DeviceBuffer grads;                  // kGrads, reduce dtype: P (stages 0-1) or S (2-3).
    DeviceBuffer gathered;               // kBuffers, stage 3: P elements, compute dtype.
    std::shared_ptr<GatherWork> gather;  // In flight into `gathered` (and its group's).
    DeviceBuffer view;                   // kBuffers: fp32 params view (bf16 compute).
    DeviceBuffer grad_view;              // kBuffers: fp32 gradient the model adds into.
    const float* param_ptr = nullptr;    // What PreForward/PreBackward hand out.
    float* grad_ptr = nullptr;
    int param_refs = 0;
    int grad_refs = 0;
    // Stages 2-3: `grads` counts as zeros whatever its bytes hold (set at
    // Create and by ZeroGradients, which then writes nothing); the step's
    // first reduce-scatter of the unit writes straight into it instead of
    // being added, and Step zero-fills any unit still unwritten.
    bool grads_zero = true;
  };
  struct ReducePiece {
    int unit = 0;
    DeviceBuffer staging;  // P elements of the reduce dtype, reduced in place.
    bool direct = false;   // Reduced into the unit's `grads`, not staging's slice.
  };
  struct PendingReduce {  // One (grouped) reduce-scatter in flight.
    std::unique_ptr<Work> work;
    std::vector<ReducePiece> pieces;
  };

  ShardedEngine(const ShardPlan& plan, Communicator* comm, const EngineOptions& options);
  std::vector<int64_t> OptimizerSizes() const;  // opt_range lengths.
  absl::Status InitStore();
  absl::Status InitUnit(int u, const std::vector<float>& initial);
  // Unit u's master weights in device memory: the store's own, or a copy
  // into `staging` (kBuffers) when offloaded.
  absl::StatusOr<const float*> MasterOnDevice(int u, DeviceBuffer& staging);
  absl::Status CheckFits() const;
  // Params offload (engine_params.cc): `fill` writes unit u's new compute
  // shard into device memory it is given; the shard then goes to the store.
  absl::Status WriteParamShard(int u, const std::function<absl::Status(void*)>& fill);
  // Unit u's shard from the store into `dst` (device memory), after asking
  // the store to read ahead the units gathered next.
  absl::Status StageParamShard(int u, void* dst);
  // The step ended: the orders recorded become the next step's, and the store
  // reads ahead the first units of its gathers.
  absl::Status EndStepOrders();
  // A buffer of `kind` on the device, empty.
  DeviceBuffer Buffer(MemoryKind kind) { return DeviceBuffer(device_, &accountant_, kind); }
  // Allocates inside a hook, which cannot return an error: out of device
  // memory there ends the process with the reason (ZS_CHECK); sizes are
  // bounded by BufferBytesBound, checked against free memory at Create.
  // `zeroed` false: contents undefined (a buffer a collective overwrites).
  void MustAllocate(DeviceBuffer& buffer, int64_t bytes, bool zeroed = true);

  // Step phases (engine_step.cc).
  void* ShardGrad(Unit& unit) const;  // Reduced gradient over opt_range.
  absl::Status ReduceGradients();
  absl::StatusOr<double> GlobalSumSquares();
  absl::Status UpdateShards(float multiplier);
  void ZeroGradients();

  // Hook machinery (engine_hooks.cc).
  Unit& At(int unit);
  const float* AcquireParams(int u);
  void ReleaseParams(int u);
  // One all-gather of `group`'s units (distinct, none gathered).
  void IssueGathers(const std::vector<int>& group);
  // Stage 3, unit u just opened: records it, gathers it (with the rest of
  // its bucket) unless it is, frees gathered units outside the window, and
  // gathers the window's next buckets.
  void GatherWindow(int u);
  // Orders unit's gather before its use (on the stream where the backend
  // can, else by a host wait); false when it failed (its buffer retired).
  bool SettleGather(Unit& unit, bool on_stream);
  // Waits for a prefetch in flight into unit's gather buffer, then frees it
  // unless the unit is open.
  void FreeGather(Unit& unit);
  // Whether u's gathered copy stays across its Post*: stage 3 and the order
  // expects u within the prefetch window.
  bool KeepGathered(int u) const;
  void FlushGrads(int u);
  // One (grouped) reduce-scatter of `units`' closed gradients (grad_view),
  // after the one in flight completes.
  void IssueReduceGroup(const std::vector<int>& units);
  void DrainOneReduce();
  absl::Status DrainAll();
  void Fail(const absl::Status& status);
  void Retire(DeviceBuffer& buffer);
  absl::Status Await(std::unique_ptr<Work>& work);
  // Orders `work` before later device work: on the device stream where the
  // backend can (the Work joins in_flight_), by a host wait (Await)
  // otherwise. [Note: stream-ordered collectives] in communicator.h.
  absl::Status Sequence(std::unique_ptr<Work>& work);
  // Waits for every stream-ordered Work, one deadline for all; the first
  // error aborts the communicator and becomes status().
  absl::Status AwaitInFlight();
  bool Failed() const { return !status_.ok(); }
  int64_t cbytes() const { return DTypeSize(options_.compute_dtype); }
  int64_t gbytes() const { return DTypeSize(options_.reduce_dtype); }
  // The rank's slice of a full buffer of `elem_bytes`-sized elements.
  uint8_t* Slice(const DeviceBuffer& full, int64_t shard_numel, int64_t elem_bytes) const;

  ShardPlan plan_;
  Communicator* comm_;
  EngineOptions options_;
  std::unique_ptr<Device> owned_device_;  // When options.device is null.
  Device* device_ = nullptr;
  Communicator* control_comm_ = nullptr;
  int rank_ = 0;
  int world_size_ = 1;
  MemoryAccountant accountant_;
  std::vector<Unit> units_;
  std::unique_ptr<OptimizerStore> opt_;  // Master, m, v of every unit.
  std::unique_ptr<ParamStore> params_;   // Stage-3 compute shards, with params offload.
  // Stage 3 orders, learned step by step (common/gather_order.h): `use`, the
  // order the model opens units in (the all-gather prefetch); `gather`, the
  // order of the all-gathers (the parameter store's read-ahead). Evaluation
  // keeps its own pair; `orders_` points at the one in use.
  struct Orders {
    GatherOrder use, gather;
  };
  Orders train_orders_, eval_orders_;
  Orders* orders_ = &train_orders_;
  std::deque<PendingReduce> pending_;
  // Units whose closed brackets' gradients (grad_view) wait for the next
  // grouped reduce-scatter, weighed in reduce-dtype bytes.
  ReduceBucket reduce_bucket_;
  // Stream-ordered collectives not yet Waited; their buffers may already be
  // freed (stream-ordered, so not reused before the op is done).
  std::vector<std::unique_ptr<Work>> in_flight_;
  std::vector<DeviceBuffer> retired_;  // [Note: failed collective buffers]
  absl::Status status_;
  int64_t step_ = 0;
  bool compute_copy_stale_ = false;
};

}  // namespace zeroshard
