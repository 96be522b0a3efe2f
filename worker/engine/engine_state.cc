// ShardedEngine state access: full parameters (export, tests), the
// optimizer state for checkpoints and resharding, restore, and rebuilding
// compute copies. The state itself lives in the OptimizerStore
// (worker/offload/optimizer_store.h). See sharded_engine.h.
#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/engine/sharded_engine.h"

namespace zeroshard {

absl::StatusOr<const float*> ShardedEngine::MasterOnDevice(int u, DeviceBuffer& staging) {
  const UnitState resident = opt_->Resident(u);
  if (resident.master != nullptr) return resident.master;
  const int64_t n = units_[u].opt_range.length;
  std::vector<float> host(static_cast<size_t>(n));
  ZS_RETURN_IF_ERROR(opt_->Read(u, 0, n, host.data(), nullptr, nullptr));
  ZS_RETURN_IF_ERROR(staging.Allocate(n * 4));
  ZS_RETURN_IF_ERROR(device_->Copy(staging.data(), host.data(), n * 4));
  // `host` is freed on return: the copy must have landed.
  ZS_RETURN_IF_ERROR(device_->Synchronize(options_.collective_timeout));
  return staging.as<float>();
}

absl::StatusOr<std::vector<float>> ShardedEngine::GatherFullParams(int u) {
  EngineUnit& unit = At(u);
  ZS_RETURN_IF_ERROR(tracker_.AwaitInFlight());  // State crosses to the host.
  std::vector<float> out(static_cast<size_t>(unit.plan->numel));
  const int64_t bytes = static_cast<int64_t>(out.size()) * 4;
  if (zero_stage().replicated()) {  // Every rank holds all of it.
    ZS_RETURN_IF_ERROR(opt_->Read(u, 0, unit.plan->numel, out.data(), nullptr, nullptr));
    return out;
  }
  DeviceBuffer staging = ctx_.Buffer(MemoryKind::kBuffers);
  ZS_ASSIGN_OR_RETURN(const float* master, MasterOnDevice(u, staging));
  DeviceBuffer full = ctx_.Buffer(MemoryKind::kBuffers);
  ZS_RETURN_IF_ERROR(full.Allocate(unit.plan->padded_numel * 4));
  std::unique_ptr<Work> work = comm_->AllGather(master, full.data(), unit.plan->shard_numel,
                                                DType::kFp32, {options_.collective_timeout});
  if (absl::Status s = tracker_.Await(work); !s.ok()) {
    tracker_.Retire(full);  // [Note: failed collective buffers]
    tracker_.Retire(staging);
    return s;
  }
  ZS_RETURN_IF_ERROR(device_->Copy(out.data(), full.data(), bytes));
  ZS_RETURN_IF_ERROR(device_->Synchronize(options_.collective_timeout));
  return out;
}

OptimizerShardView OptimizerShardView::Slice(ElementRange sub) const {
  const int64_t skip = sub.offset - range.offset;
  ZS_CHECK(skip >= 0 && sub.length >= 0 && skip + sub.length <= range.length);
  if (master == nullptr) return {sub, nullptr, nullptr, nullptr};  // Offloaded.
  return {sub, master + skip, m + skip, v + skip};
}

OptimizerShardView ShardedEngine::OptimizerShard(int u) const {
  ZS_CHECK(u >= 0 && u < static_cast<int>(units_.size()));
  const UnitState s = opt_->Resident(u);
  return {units_[u].opt_range, s.master, s.m, s.v};
}

absl::Status ShardedEngine::LoadShardState(int u, absl::Span<const float> master,
                                           absl::Span<const float> m, absl::Span<const float> v) {
  if (u < 0 || u >= static_cast<int>(units_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("unit: ", u, " out of range"));
  }
  EngineUnit& unit = units_[u];
  const size_t n = static_cast<size_t>(unit.opt_range.length);
  for (auto [name, span, may_be_empty] :
       {std::tuple{"master", master, false}, std::tuple{"m", m, true}, std::tuple{"v", v, true}}) {
    if (span.size() != n && !(may_be_empty && span.empty())) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": ", span.size(), " elements, expected ", n, " for unit '", unit.plan->name, "'"));
    }
  }
  ZS_RETURN_IF_ERROR(tracker_.AwaitInFlight());
  compute_copy_stale_ = true;
  // The spans are the caller's: the store has read them on return. Empty
  // m or v: null, which the store loads as zeros.
  return opt_->Load(u, master.data(), m.empty() ? nullptr : m.data(),
                    v.empty() ? nullptr : v.data());
}

float* ShardedEngine::HostMaster(int u) {
  ZS_CHECK(u >= 0 && u < static_cast<int>(units_.size()));
  if (device_->kind() != DeviceKind::kCpu) return nullptr;
  return opt_->Resident(u).master;  // Null unless the state is resident (kDevice).
}

absl::Status ShardedEngine::CopyOptimizerState(int u, ElementRange sub, float* master, float* m,
                                               float* v) {
  if (u < 0 || u >= static_cast<int>(units_.size())) {
    return absl::InvalidArgumentError(absl::StrCat("unit: ", u, " out of range"));
  }
  const ElementRange held = units_[u].opt_range;
  if (sub.offset < held.offset || sub.length < 0 || sub.end() > held.end()) {
    return absl::InvalidArgumentError(absl::StrCat("range [", sub.offset, ", ", sub.end(),
                                                   ") is outside unit ", u, "'s optimizer range [",
                                                   held.offset, ", ", held.end(), ")"));
  }
  ZS_RETURN_IF_ERROR(tracker_.AwaitInFlight());
  return opt_->Read(u, sub.offset - held.offset, sub.length, master, m, v);
}

absl::Status ShardedEngine::RebuildComputeCopy() {
  ZS_RETURN_IF_ERROR(tracker_.AwaitInFlight());
  std::vector<IssuedWork> gathers;
  DeviceBuffer staging = ctx_.Buffer(MemoryKind::kBuffers);
  for (int u = 0; u < static_cast<int>(units_.size()); ++u) {
    absl::Status s = RebuildUnit(u, staging, gathers);
    if (!s.ok()) {
      tracker_.AbandonIssued(gathers, s);  // Issued gathers may still write.
      return s;
    }
  }
  ZS_RETURN_IF_ERROR(tracker_.AwaitEach(gathers));
  compute_copy_stale_ = false;
  return absl::OkStatus();
}

// Unit u's compute copy from its master shard; at stages 1-2 the all-gather
// that spreads it, added to `gathers`.
absl::Status ShardedEngine::RebuildUnit(int u, DeviceBuffer& staging,
                                        std::vector<IssuedWork>& gathers) {
  EngineUnit& unit = units_[u];
  const int64_t n = unit.opt_range.length;
  ZS_ASSIGN_OR_RETURN(const float* master, MasterOnDevice(u, staging));
  auto convert = [&](void* out) {
    return device_->Convert(master, DType::kFp32, out, options_.compute_dtype, n);
  };
  // Stage 3: the store holds the compute shard.
  if (params_ != nullptr) return updater_->WriteParamShard(u, convert);
  void* dst = ctx_.ParamsShard(unit);
  if (!ctx_.master_is_params) ZS_RETURN_IF_ERROR(convert(dst));  // Else dst is the master.
  if (zero_stage().gathers_after_step) {
    gathers.push_back({comm_->AllGather(dst, unit.params.data(), n, options_.compute_dtype,
                                        {options_.collective_timeout}),
                       &unit.params});
  }
  return absl::OkStatus();
}

}  // namespace zeroshard
