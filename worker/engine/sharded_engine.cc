// ShardedEngine construction, state access and teardown. Hooks are in
// engine_hooks.cc, the update in engine_step.cc.
#include "worker/engine/sharded_engine.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/job_refusal.h"
#include "common/memory_model.h"
#include "common/status_macros.h"
#include "worker/comm/wait_or_abort.h"
#include "worker/device/cpu_device.h"
#include "worker/offload/offload_model.h"

namespace zeroshard {
namespace {

absl::Status Validate(const ShardPlan& plan, const Communicator* comm, const EngineOptions& o) {
  auto bad = [](auto... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (comm == nullptr) return bad("comm: must not be null");
  if (comm->world_size() != plan.world_size) {
    return bad("plan.world_size (", plan.world_size, ") != comm world_size (", comm->world_size(),
               ")");
  }
  if (!IsZeroStage(o.stage)) return bad("stage: ", o.stage, " (expected 0..3)");
  for (auto [name, d] :
       {std::pair{"compute_dtype", o.compute_dtype}, std::pair{"reduce_dtype", o.reduce_dtype}}) {
    if (d != DType::kFp32 && d != DType::kBf16) {
      return bad(name, ": ", DTypeName(d), " (expected fp32 or bf16)");
    }
  }
  const AdamWHyperparams& h = o.adamw;
  if (!(h.lr >= 0.0f) || !std::isfinite(h.lr)) return bad("adamw.lr: must be finite and >= 0");
  if (!(h.beta1 >= 0.0f && h.beta1 < 1.0f)) return bad("adamw.beta1: must be in [0, 1)");
  if (!(h.beta2 >= 0.0f && h.beta2 < 1.0f)) return bad("adamw.beta2: must be in [0, 1)");
  if (!(h.eps > 0.0f)) return bad("adamw.eps: must be > 0");
  if (!(h.weight_decay >= 0.0f)) return bad("adamw.weight_decay: must be >= 0");
  if (!(o.collective_timeout > absl::ZeroDuration())) {
    return bad("collective_timeout: must be positive");
  }
  if (o.reserved_bytes < 0) return bad("reserved_bytes: must be >= 0");
  if (o.params_offload.enabled && !ZeroStageOf(o.stage).shards_params) {
    return bad("params_offload: needs stage 3 (stage ", o.stage, ")");
  }
  if (o.params_offload.prefetch < 0 || o.params_offload.prefetch > 64) {
    return bad("params_offload.prefetch: ", o.params_offload.prefetch, " (expected 0..64)");
  }
  if (o.prefetch < 0 || o.prefetch > 64) return bad("prefetch: ", o.prefetch, " (expected 0..64)");
  if (o.bucket_bytes < 0) return bad("bucket_bytes: ", o.bucket_bytes, " (expected >= 0)");
  return absl::OkStatus();
}

absl::Status CheckInitial(const UnitPlan& unit, int u, const std::vector<float>& initial) {
  if (static_cast<int64_t>(initial.size()) == unit.numel) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("initial_units[", u, "]: ", initial.size(),
                                                 " elements, unit '", unit.name, "' has ",
                                                 unit.numel));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardedEngine>> ShardedEngine::Create(
    const ShardPlan& plan, Communicator* comm, const EngineOptions& options,
    const std::vector<std::vector<float>>& initial_units) {
  if (initial_units.size() != plan.units.size()) {
    return absl::InvalidArgumentError(absl::StrCat("initial_units: ", initial_units.size(),
                                                   " units, plan has ", plan.units.size()));
  }
  for (size_t u = 0; u < plan.units.size(); ++u) {
    ZS_RETURN_IF_ERROR(CheckInitial(plan.units[u], static_cast<int>(u), initial_units[u]));
  }
  return Create(plan, comm, options, [&](int u, std::vector<float>* values) {
    *values = initial_units[u];
    return absl::OkStatus();
  });
}

absl::StatusOr<std::unique_ptr<ShardedEngine>> ShardedEngine::Create(const ShardPlan& plan,
                                                                     Communicator* comm,
                                                                     const EngineOptions& options,
                                                                     const UnitInit& init) {
  ZS_RETURN_IF_ERROR(Validate(plan, comm, options));
  std::unique_ptr<ShardedEngine> engine(new ShardedEngine(plan, comm, options));
  ZS_RETURN_IF_ERROR(engine->CheckFits());
  ZS_RETURN_IF_ERROR(engine->InitStore());
  ZS_RETURN_IF_ERROR(engine->InitParts());
  std::vector<float> values;  // One unit at a time: never the whole model.
  for (int u = 0; u < static_cast<int>(plan.units.size()); ++u) {
    ZS_RETURN_IF_ERROR(init(u, &values));
    ZS_RETURN_IF_ERROR(CheckInitial(plan.units[u], u, values));
    ZS_RETURN_IF_ERROR(engine->InitUnit(u, values));
  }
  return engine;
}

ShardedEngine::ShardedEngine(const ShardPlan& plan, Communicator* comm,
                             const EngineOptions& options)
    : plan_(plan),
      comm_(comm),
      options_(options),
      rank_(comm->rank()),
      world_size_(comm->world_size()),
      tracker_(comm, options.collective_timeout),
      units_(plan_.units.size()) {
  device_ = options_.device;
  if (device_ == nullptr) {
    owned_device_ = std::make_unique<CpuDevice>(options_.optimizer_threads);
    device_ = owned_device_.get();
  }
  control_comm_ = options_.control_comm != nullptr ? options_.control_comm : comm_;
  options_.offload.timeout = options_.collective_timeout;
  options_.params_offload.timeout = options_.collective_timeout;
  if (options_.offload.cpu_threads == 0) options_.offload.cpu_threads = options_.optimizer_threads;
  ctx_ = EngineContext{&plan_,    &options_, device_, comm_,      &accountant_,
                       &tracker_, &units_,   rank_,   world_size_};
  for (EngineUnit& unit : units_) ctx_.InitBuffers(unit);
  ctx_.master_is_params = options_.compute_dtype == DType::kFp32 &&
                          options_.offload.target == OffloadTarget::kDevice &&
                          !options_.params_offload.enabled;
}

// Model state and the transient bound (common/memory_model.h, the model
// `zeroshard plan` uses) against the device's free memory, so a hook never
// meets an exhausted device (MustAllocate) in a run that could not fit.
absl::Status ShardedEngine::CheckFits() const {
  ZS_ASSIGN_OR_RETURN(const MemoryInfo info, device_->memory_info());
  const bool cuda = device_->kind() != DeviceKind::kCpu;
  MemoryModelInputs in;
  in.stage = options_.stage;
  in.compute_dtype = options_.compute_dtype;
  in.reduce_dtype = options_.reduce_dtype;
  in.offload_optimizer = ToOptimizerOffload(options_.offload.target);
  in.offload_params_nvme = options_.params_offload.enabled;
  in.offload_prefetch = options_.params_offload.prefetch;
  in.gather_prefetch = options_.prefetch;
  in.bucket_bytes = options_.bucket_bytes;
  in.cuda = cuda;
  in.activation_bytes = options_.reserved_bytes;
  ZS_ASSIGN_OR_RETURN(const MemoryPrediction p, PredictMemory(plan_, in));
  // Host-offloaded state on the CPU device is the same memory.
  const int64_t resident = p.state.total() + (cuda ? 0 : p.host_offload);
  const int64_t counted = resident + p.gather_buffers + p.activations;
  // On the CPU device every buffer is malloc's, and a run's pattern of
  // growing and freeing them fragments the heap: measured at 18.5% of the
  // counted bytes (`medium`, stage 3, NVMe offload), so a fifth is kept.
  const int64_t slack = cuda ? 0 : counted / 5;
  const int64_t needed = counted + slack;
  if (needed > info.free_bytes) {
    return AsJobRefusal(absl::ResourceExhaustedError(absl::StrCat(
        "the engine needs ", needed, " bytes on ", device_->name(), " (model state ", resident,
        ", transient buffers ", p.gather_buffers, ", activations and work buffers ", p.activations,
        ", heap slack ", slack, "); ", info.free_bytes, " are free")));
  }
  return absl::OkStatus();
}

std::vector<int64_t> ShardedEngine::OptimizerSizes() const {
  std::vector<int64_t> sizes;
  for (const UnitPlan& u : plan_.units) {
    sizes.push_back(OptimizerRange(u, options_.stage, rank_).length);
  }
  return sizes;
}

absl::Status ShardedEngine::InitStore() {
  OptimizerStoreOptions o = options_.offload;
  if (o.file_prefix.empty())
    o.file_prefix = absl::StrCat("zeroshard-", ::getpid(), "-r", rank_, "-");
  std::vector<float*> masters;  // Empty: the store's own (EngineContext::master_is_params).
  if (ctx_.master_is_params) {
    for (size_t u = 0; u < units_.size(); ++u) {
      EngineUnit& unit = units_[u];
      unit.plan = &plan_.units[u];
      ZS_RETURN_IF_ERROR(unit.params.Allocate(ctx_.ParamsNumel(unit) * cbytes()));
      masters.push_back(static_cast<float*>(ctx_.ParamsShard(unit)));
    }
  }
  ZS_ASSIGN_OR_RETURN(
      opt_, CreateOptimizerStore(o, OptimizerSizes(), device_, &accountant_, std::move(masters)));
  if (!options_.params_offload.enabled) return absl::OkStatus();
  ParamStoreOptions p = options_.params_offload;
  if (p.file_prefix.empty()) p.file_prefix = o.file_prefix;
  std::vector<int64_t> bytes;
  for (const UnitPlan& u : plan_.units) bytes.push_back(u.shard_numel * cbytes());
  ZS_ASSIGN_OR_RETURN(params_, ParamStore::Create(p, std::move(bytes), &accountant_));
  return absl::OkStatus();
}

absl::Status ShardedEngine::InitParts() {
  gathers_ = std::make_unique<GatherScheduler>(ctx_, params_.get());
  reducer_ = std::make_unique<GradientReducer>(ctx_);
  updater_ = std::make_unique<ShardUpdater>(ctx_, control_comm_, opt_.get(), params_.get(),
                                            reducer_.get());
  return absl::OkStatus();
}

absl::Status ShardedEngine::InitUnit(int u, const std::vector<float>& initial) {
  EngineUnit& unit = units_[u];
  unit.plan = &plan_.units[u];
  const int64_t P = unit.plan->padded_numel, S = unit.plan->shard_numel;
  const ZeroStage& z = zero_stage();
  unit.opt_range = OptimizerRange(*unit.plan, z.number, rank_);
  // The padded initial values on the device; padding is zero (shard_plan.h).
  DeviceBuffer padded = ctx_.Buffer(MemoryKind::kBuffers);
  ZS_RETURN_IF_ERROR(padded.Allocate(P * 4));
  ZS_RETURN_IF_ERROR(
      device_->Copy(padded.data(), initial.data(), static_cast<int64_t>(initial.size()) * 4));
  const float* all = padded.as<float>();
  // The master weights from the caller's values (zero padding past numel).
  std::vector<float> master(static_cast<size_t>(unit.opt_range.length), 0.0f);
  const int64_t numel = static_cast<int64_t>(initial.size());
  for (int64_t i = unit.opt_range.offset; i < std::min(unit.opt_range.end(), numel); ++i) {
    master[i - unit.opt_range.offset] = initial[i];
  }
  ZS_RETURN_IF_ERROR(opt_->Load(u, master.data(), nullptr, nullptr));
  const int64_t held = ctx_.ParamsNumel(unit);
  const float* from = all + (z.shards_params ? unit.opt_range.offset : 0);
  auto convert = [&](void* out) {
    return device_->Convert(from, DType::kFp32, out, options_.compute_dtype, held);
  };
  if (params_ != nullptr) {
    ZS_RETURN_IF_ERROR(updater_->WriteParamShard(u, convert));
  } else {
    // Allocated by InitStore where it holds the master (loaded above).
    if (!unit.params.allocated()) ZS_RETURN_IF_ERROR(unit.params.Allocate(held * cbytes()));
    ZS_RETURN_IF_ERROR(convert(unit.params.data()));
  }
  ZS_RETURN_IF_ERROR(
      unit.grads.Allocate((z.shards_grads ? S : P) * DTypeSize(options_.reduce_dtype)));
  // `padded` is freed on return: the copy out of the caller's vector and the
  // conversions must have finished first.
  return device_->Synchronize(options_.collective_timeout);
}

ShardedEngine::~ShardedEngine() {
  // After a failure the generation is over: waiting out a full collective
  // timeout for ops stuck on a dead peer would only delay recovery, and
  // retiring their buffers (below) is safe whatever they do later.
  const absl::Duration wait = Failed() ? absl::Seconds(1) : options_.collective_timeout;
  bool lost = reducer_ != nullptr && !reducer_->Settle(wait);
  if (gathers_ != nullptr && !gathers_->Settle(wait)) lost = true;
  if (!tracker_.SettleInFlight(wait)) lost = true;  // Their buffers are stream-ordered frees.
  if (lost) {
    comm_->Abort();
    if (reducer_ != nullptr) reducer_->RetirePending();
    for (EngineUnit& unit : units_) tracker_.Keep(std::move(unit.gathered));
  }
  // [Note: failed collective buffers] A backend may still write into retired
  // buffers: they are never freed (so never reused).
  tracker_.AbandonRetired();
}

EngineUnit& ShardedEngine::At(int unit) {
  ZS_CHECK(unit >= 0 && unit < static_cast<int>(units_.size()));
  return units_[unit];
}

int64_t ShardedEngine::BufferBytesBound() const {
  return GatherBufferBound(plan_, options_.stage, options_.compute_dtype, options_.reduce_dtype,
                           options_.prefetch, options_.bucket_bytes);
}

}  // namespace zeroshard
