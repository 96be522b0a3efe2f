// ShardedEngine construction, state access and teardown. Hooks are in
// engine_hooks.cc, the update in engine_step.cc.
#include "worker/engine/sharded_engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "worker/comm/wait_or_abort.h"
#include "worker/engine/convert.h"

namespace zeroshard {
namespace {

absl::Status Validate(const ShardPlan& plan, const Communicator* comm,
                      const EngineOptions& o, const std::vector<std::vector<float>>& initial) {
  auto bad = [](auto... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (comm == nullptr) return bad("comm: must not be null");
  if (comm->world_size() != plan.world_size) {
    return bad("plan.world_size (", plan.world_size, ") != comm world_size (",
               comm->world_size(), ")");
  }
  if (o.stage < 0 || o.stage > 3) return bad("stage: ", o.stage, " (expected 0..3)");
  for (auto [name, d] : {std::pair{"compute_dtype", o.compute_dtype},
                         std::pair{"reduce_dtype", o.reduce_dtype}}) {
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
  if (initial.size() != plan.units.size()) {
    return bad("initial_units: ", initial.size(), " units, plan has ", plan.units.size());
  }
  for (size_t u = 0; u < initial.size(); ++u) {
    if (static_cast<int64_t>(initial[u].size()) != plan.units[u].numel) {
      return bad("initial_units[", u, "]: ", initial[u].size(), " elements, unit '",
                 plan.units[u].name, "' has ", plan.units[u].numel);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ShardedEngine>> ShardedEngine::Create(
    const ShardPlan& plan, Communicator* comm, const EngineOptions& options,
    const std::vector<std::vector<float>>& initial_units) {
  ZS_RETURN_IF_ERROR(Validate(plan, comm, options, initial_units));
  std::unique_ptr<ShardedEngine> engine(new ShardedEngine(plan, comm, options));
  for (int u = 0; u < static_cast<int>(plan.units.size()); ++u) {
    engine->InitUnit(u, initial_units[u]);
  }
  return engine;
}

ShardedEngine::ShardedEngine(const ShardPlan& plan, Communicator* comm,
                             const EngineOptions& options)
    : plan_(plan), comm_(comm), options_(options), rank_(comm->rank()),
      world_size_(comm->world_size()), units_(plan_.units.size()) {}

void ShardedEngine::InitUnit(int u, const std::vector<float>& initial) {
  Unit& unit = units_[u];
  unit.plan = &plan_.units[u];
  const int64_t P = unit.plan->padded_numel, S = unit.plan->shard_numel;
  const int stage = options_.stage;
  unit.opt_range = OptimizerRange(*unit.plan, stage, rank_);
  // The padded initial values; padding is zero (shard_plan.h).
  std::vector<float> padded(static_cast<size_t>(P), 0.0f);
  std::copy(initial.begin(), initial.end(), padded.begin());
  const int64_t n = unit.opt_range.length;
  for (AccountedBuffer* b : {&unit.master, &unit.m, &unit.v}) {
    *b = AccountedBuffer(&accountant_, MemoryKind::kOptimizer);
    b->Allocate(n * 4);
  }
  std::memcpy(unit.master.data(), padded.data() + unit.opt_range.offset, n * 4);
  unit.params = AccountedBuffer(&accountant_, MemoryKind::kParams);
  unit.grads = AccountedBuffer(&accountant_, MemoryKind::kGrads);
  if (stage <= 2) {
    unit.params.Allocate(P * cbytes());
    FromFp32(padded.data(), options_.compute_dtype, unit.params.data(), P);
  } else {
    unit.params.Allocate(S * cbytes());
    FromFp32(padded.data() + unit.opt_range.offset, options_.compute_dtype, unit.params.data(), S);
  }
  unit.grads.Allocate((stage <= 1 ? P : S) * gbytes());
  for (AccountedBuffer* b : {&unit.gathered, &unit.view, &unit.grad_view}) {
    *b = AccountedBuffer(&accountant_, MemoryKind::kBuffers);
  }
}

ShardedEngine::~ShardedEngine() {
  bool lost = false;
  // After a failure the generation is over: waiting out a full collective
  // timeout for ops stuck on a dead peer would only delay recovery, and
  // retiring their buffers (below) is safe whatever they do later.
  const absl::Duration wait = Failed() ? absl::Seconds(1) : options_.collective_timeout;
  auto settle = [&](std::unique_ptr<Work>& work) {
    if (work == nullptr) return true;
    const bool ok = work->Wait(wait).ok();
    work.reset();
    return ok;
  };
  for (PendingReduce& p : pending_) {
    if (!settle(p.work)) lost = true;
  }
  for (Unit& unit : units_) {
    if (!settle(unit.gather_work)) lost = true;
  }
  if (lost) {
    comm_->Abort();
    for (PendingReduce& p : pending_) retired_.push_back(std::move(p.staging));
    for (Unit& unit : units_) retired_.push_back(std::move(unit.gathered));
  }
  // [Note: failed collective buffers] A backend may still write into retired
  // buffers: they are never freed (so never reused).
  for (AccountedBuffer& b : retired_) KeepForever(b.Abandon());
}

ShardedEngine::Unit& ShardedEngine::At(int unit) {
  ZS_CHECK(unit >= 0 && unit < static_cast<int>(units_.size()));
  return units_[unit];
}

uint8_t* ShardedEngine::Slice(const AccountedBuffer& full, int64_t shard_numel,
                              int64_t elem_bytes) const {
  return full.as<uint8_t>() + static_cast<int64_t>(rank_) * shard_numel * elem_bytes;
}

absl::StatusOr<std::vector<float>> ShardedEngine::GatherFullParams(int u) {
  Unit& unit = At(u);
  if (Failed()) return status_;
  std::vector<float> out(static_cast<size_t>(unit.plan->numel));
  if (options_.stage == 0) {
    std::memcpy(out.data(), unit.master.data(), out.size() * 4);
    return out;
  }
  AccountedBuffer full(&accountant_, MemoryKind::kBuffers);
  full.Allocate(unit.plan->padded_numel * 4);
  std::unique_ptr<Work> work = comm_->AllGather(unit.master.data(), full.data(),
                                                unit.plan->shard_numel, DType::kFp32,
                                                {options_.collective_timeout});
  if (absl::Status s = Await(work); !s.ok()) {
    Retire(full);  // [Note: failed collective buffers]
    return s;
  }
  std::memcpy(out.data(), full.data(), out.size() * 4);
  return out;
}

OptimizerShardView OptimizerShardView::Slice(ElementRange sub) const {
  const int64_t skip = sub.offset - range.offset;
  ZS_CHECK(skip >= 0 && sub.length >= 0 && skip + sub.length <= range.length);
  return {sub, master + skip, m + skip, v + skip};
}

OptimizerShardView ShardedEngine::OptimizerShard(int u) const {
  ZS_CHECK(u >= 0 && u < static_cast<int>(units_.size()));
  const Unit& unit = units_[u];
  return {unit.opt_range, unit.master.as<float>(), unit.m.as<float>(), unit.v.as<float>()};
}

absl::Status ShardedEngine::LoadShardState(int u, absl::Span<const float> master,
                                           absl::Span<const float> m,
                                           absl::Span<const float> v) {
  if (u < 0 || u >= static_cast<int>(units_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("unit: ", u, " out of range"));
  }
  Unit& unit = units_[u];
  const size_t n = static_cast<size_t>(unit.opt_range.length);
  for (auto [name, span] : {std::pair{"master", master}, std::pair{"m", m}, std::pair{"v", v}}) {
    if (span.size() != n) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": ", span.size(),
                                                     " elements, expected ", n, " for unit '",
                                                     unit.plan->name, "'"));
    }
  }
  std::memcpy(unit.master.data(), master.data(), n * 4);
  std::memcpy(unit.m.data(), m.data(), n * 4);
  std::memcpy(unit.v.data(), v.data(), n * 4);
  compute_copy_stale_ = true;
  return absl::OkStatus();
}

absl::Status ShardedEngine::RebuildComputeCopy() {
  if (Failed()) return status_;
  std::vector<std::unique_ptr<Work>> works;
  for (Unit& unit : units_) {
    const int64_t n = unit.opt_range.length;
    if (options_.stage == 0 || options_.stage == 3) {
      FromFp32(unit.master.as<float>(), options_.compute_dtype, unit.params.data(), n);
      continue;
    }
    uint8_t* mine = Slice(unit.params, n, cbytes());
    FromFp32(unit.master.as<float>(), options_.compute_dtype, mine, n);
    works.push_back(comm_->AllGather(mine, unit.params.data(), n, options_.compute_dtype,
                                     {options_.collective_timeout}));
  }
  for (std::unique_ptr<Work>& w : works) ZS_RETURN_IF_ERROR(Await(w));
  compute_copy_stale_ = false;
  return absl::OkStatus();
}

int64_t ShardedEngine::BufferBytesBound() const {
  int64_t max_padded = 0;
  for (const UnitPlan& u : plan_.units) max_padded = std::max(max_padded, u.padded_numel);
  const bool bf16_view = options_.compute_dtype == DType::kBf16;
  // Params: stage 3 holds the unit in use and one prefetched (each gathered
  // in c, plus the fp32 view under bf16); stages 0-2 only the bf16 view.
  const int64_t params = options_.stage == 3 ? 2 * (cbytes() + (bf16_view ? 4 : 0))
                                             : (bf16_view ? 4 : 0);
  // Grads: the fp32 view the model adds into, plus two reduce-scatter
  // stagings (one in flight, one being issued) at stages 2-3.
  const int64_t grads = 4 + (options_.stage >= 2 ? 2 * 4 : 0);
  // Step's fp32 gradient conversion or GatherFullParams's buffer.
  const int64_t step = 4;
  return max_padded * (params + grads + step);
}

}  // namespace zeroshard
