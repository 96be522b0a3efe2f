// The hooks: parameter views (gathers and prefetch at stage 3), gradient views
// and their reduction (stages 2-3). See sharded_engine.h.
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "worker/comm/wait_or_abort.h"
#include "worker/engine/sharded_engine.h"

namespace zeroshard {

void ShardedEngine::Fail(const absl::Status& status) {
  if (status_.ok() && !status.ok()) status_ = status;
}

// [Note: failed collective buffers] (worker/comm/wait_or_abort.h): a failed
// wait aborts the communicator, and the caller moves that op's buffers to
// retired_, never freeing them (see ~ShardedEngine).
absl::Status ShardedEngine::Await(std::unique_ptr<Work>& work) {
  ZS_CHECK(work != nullptr);
  absl::Status s = WaitOrAbort(*comm_, *work, options_.collective_timeout);
  work.reset();
  Fail(s);
  return s;
}

absl::Status ShardedEngine::Sequence(std::unique_ptr<Work>& work) {
  ZS_CHECK(work != nullptr);
  absl::Status s = work->CompleteOnStream();
  if (absl::IsUnimplemented(s)) return Await(work);
  if (!s.ok()) {
    // It never made it onto the stream: the generation is broken.
    comm_->Abort();
    work.reset();
    Fail(s);
    return s;
  }
  in_flight_.push_back(std::move(work));
  return absl::OkStatus();
}

absl::Status ShardedEngine::AwaitInFlight() {
  const absl::Time deadline = absl::Now() + options_.collective_timeout;
  for (std::unique_ptr<Work>& work : in_flight_) {
    if (!Failed()) {
      Fail(WaitOrAbort(*comm_, *work, std::max(deadline - absl::Now(), absl::ZeroDuration())));
    }
    work.reset();  // After Abort a Work fails fast and holds no buffer.
  }
  in_flight_.clear();
  return status_;
}

void ShardedEngine::Retire(DeviceBuffer& buffer) {
  const MemoryKind kind = buffer.kind();
  retired_.push_back(std::move(buffer));
  buffer = Buffer(kind);
}

void ShardedEngine::IssueGathers(const std::vector<int>& group) {
  if (group.empty()) return;
  std::vector<CollectiveArgs> args;
  for (int u : group) {
    Unit& unit = units_[u];
    // Zeros where nothing will be gathered: the model unwinds, Step reports
    // the error. Otherwise the gather overwrites every byte.
    MustAllocate(unit.gathered, unit.plan->padded_numel * cbytes(), /*zeroed=*/Failed());
    if (Failed()) continue;
    const int64_t S = unit.plan->shard_numel;
    const void* send = unit.params.data();
    if (params_ != nullptr) {
      // In place: the rank's slice of the gather buffer is the send buffer.
      uint8_t* mine = Slice(unit.gathered, S, cbytes());
      if (absl::Status s = StageParamShard(u, mine); !s.ok()) {
        comm_->Abort();  // The peers would wait for this rank's gather.
        Fail(s);
        continue;
      }
      send = mine;
    }
    args.push_back({send, unit.gathered.data(), S});
  }
  if (Failed()) {
    for (int u : group) MustAllocate(units_[u].gathered, units_[u].gathered.bytes());  // Zeros.
    return;
  }
  auto gather = std::make_shared<GatherWork>();
  gather->work = comm_->AllGatherGroup(args, options_.compute_dtype, {options_.collective_timeout});
  for (int u : group) units_[u].gather = gather;
}

// Gathered units outside the open ones and the window are freed first (a
// prefetch the model did not take, once the order stops expecting it), so
// at most (1 + prefetch) buckets are ever gathered; then the open unit with
// the rest of its bucket, in one op; then the window's next buckets, one op
// each.
void ShardedEngine::GatherWindow(int u) {
  orders_->use.Record(u, options_.prefetch);
  const std::vector<std::vector<int>> window = orders_->use.WindowBuckets(options_.prefetch);
  auto ungathered = [&](const std::vector<int>& bucket, std::vector<int> group) {
    for (int w : bucket) {
      if (!units_[w].gathered.allocated() && units_[w].param_refs == 0 &&
          std::find(group.begin(), group.end(), w) == group.end()) {
        group.push_back(w);
      }
    }
    return group;
  };
  for (Unit& other : units_) {
    const int w = static_cast<int>(&other - units_.data());
    if (other.param_refs == 0 && other.gathered.allocated() &&
        !orders_->use.Expects(w, options_.prefetch)) {
      FreeGather(other);
    }
  }
  IssueGathers(ungathered(
      window[0], units_[u].gathered.allocated() ? std::vector<int>{} : std::vector<int>{u}));
  for (size_t b = 1; b < window.size(); ++b) IssueGathers(ungathered(window[b], {}));
}

bool ShardedEngine::SettleGather(Unit& unit, bool on_stream) {
  const std::shared_ptr<GatherWork> gather = std::move(unit.gather);
  unit.gather = nullptr;
  if (gather == nullptr) return true;
  if (gather->work != nullptr) {
    const absl::Status s = on_stream ? Sequence(gather->work) : Await(gather->work);
    if (!s.ok()) gather->failed = true;
  }
  if (!gather->failed) return true;
  Retire(unit.gathered);  // [Note: failed collective buffers]
  return false;
}

void ShardedEngine::FreeGather(Unit& unit) {
  SettleGather(unit, /*on_stream=*/false);
  if (unit.param_refs == 0) unit.gathered.Free();
}

bool ShardedEngine::KeepGathered(int u) const {
  return zero_stage().shards_params && orders_->use.Expects(u, options_.prefetch);
}

const float* ShardedEngine::AcquireParams(int u) {
  Unit& unit = units_[u];
  if (unit.param_refs++ > 0) return unit.param_ptr;
  if (compute_copy_stale_) {
    Fail(absl::FailedPreconditionError(
        "a hook ran after LoadShardState without RebuildComputeCopy"));
  }
  const int64_t P = unit.plan->padded_numel;
  const bool bf16_compute = options_.compute_dtype == DType::kBf16;
  const void* full = unit.params.data();
  if (zero_stage().shards_params) {
    GatherWindow(u);  // Prefetches issued before the wait for u's, to overlap it.
    if (!SettleGather(unit, /*on_stream=*/true)) MustAllocate(unit.gathered, P * cbytes());
    full = unit.gathered.data();
  }
  if (bf16_compute) {
    MustAllocate(unit.view, P * 4);
    Fail(device_->Convert(full, DType::kBf16, unit.view.data(), DType::kFp32, P));
    // Stage 3: the fp32 view replaces the bf16 gather, unless u is used again soon.
    if (!KeepGathered(u)) unit.gathered.Free();
    unit.param_ptr = unit.view.as<float>();
  } else {
    unit.param_ptr = static_cast<const float*>(full);
  }
  return unit.param_ptr;
}

void ShardedEngine::ReleaseParams(int u) {
  Unit& unit = units_[u];
  ZS_CHECK(unit.param_refs > 0);  // A Post* without its Pre*.
  if (--unit.param_refs > 0) return;
  unit.view.Free();
  if (unit.gather == nullptr && !KeepGathered(u)) unit.gathered.Free();
  unit.param_ptr = nullptr;
}

const float* ShardedEngine::PreForward(int u) {
  At(u);
  return AcquireParams(u);
}

void ShardedEngine::PostForward(int u) {
  At(u);
  ReleaseParams(u);
}

UnitBackwardView ShardedEngine::PreBackward(int u) {
  Unit& unit = At(u);
  const float* params = AcquireParams(u);
  if (unit.grad_refs++ == 0) {
    if (!zero_stage().shards_grads && options_.reduce_dtype == DType::kFp32) {
      unit.grad_ptr = unit.grads.as<float>();  // The model adds straight into it.
    } else {
      // A gradient still waiting in the reduce bucket takes this bracket's too.
      if (!reduce_bucket_.Take(u)) MustAllocate(unit.grad_view, unit.plan->padded_numel * 4);
      unit.grad_ptr = unit.grad_view.as<float>();
    }
  }
  return {params, unit.grad_ptr};
}

void ShardedEngine::PostBackward(int u) {
  Unit& unit = At(u);
  ReleaseParams(u);
  ZS_CHECK(unit.grad_refs > 0);  // PostBackward without PreBackward.
  if (--unit.grad_refs > 0) return;
  unit.grad_ptr = nullptr;
  FlushGrads(u);
}

// Moves the bracket's fp32 gradient into the resident gradient: at stages 0-1
// by adding (when it is not already the resident buffer); at stages 2-3 by a
// reduce-scatter of a staging buffer (grouped with the reduce bucket's
// others), straight into the shard gradient when that holds zeros
// (Unit::grads_zero), else in place, its slice added into the shard
// gradient once the collective completes (DrainOneReduce).
void ShardedEngine::FlushGrads(int u) {
  Unit& unit = units_[u];
  const int64_t P = unit.plan->padded_numel;
  if (!zero_stage().shards_grads) {
    if (unit.grad_view.allocated()) {
      Fail(device_->AddInto(unit.grads.data(), options_.reduce_dtype, unit.grad_view.data(),
                            DType::kFp32, P));
      unit.grad_view.Free();
    }
    return;
  }
  reduce_bucket_.Add(u, P * gbytes(),
                     [this](const std::vector<int>& group) { IssueReduceGroup(group); });
}

void ShardedEngine::IssueReduceGroup(const std::vector<int>& units) {
  // One reduce-scatter in flight (the previous bucket's, overlapping this
  // one's backward): it completes before the next staging is allocated.
  while (!pending_.empty()) DrainOneReduce();
  PendingReduce pending;
  for (int u : units) {
    Unit& unit = units_[u];
    ReducePiece piece{u, Buffer(MemoryKind::kBuffers)};
    if (options_.reduce_dtype == DType::kFp32) {
      piece.staging = std::move(unit.grad_view);
      unit.grad_view = Buffer(MemoryKind::kBuffers);
    } else {
      MustAllocate(piece.staging, unit.plan->padded_numel * 2);
      Fail(device_->Convert(unit.grad_view.data(), DType::kFp32, piece.staging.data(), DType::kBf16,
                            unit.plan->padded_numel));
      unit.grad_view.Free();
    }
    pending.pieces.push_back(std::move(piece));
  }
  if (Failed()) return;  // Nothing is reduced after a failure.
  std::vector<CollectiveArgs> args;
  for (ReducePiece& piece : pending.pieces) {
    Unit& unit = units_[piece.unit];
    const int64_t S = unit.plan->shard_numel;
    piece.direct = unit.grads_zero;
    unit.grads_zero = false;
    void* recv = piece.direct ? unit.grads.data() : Slice(piece.staging, S, gbytes());
    args.push_back({piece.staging.data(), recv, S});
  }
  pending.work = comm_->ReduceScatterGroup(args, options_.reduce_dtype, ReduceOp::kSum,
                                           {options_.collective_timeout});
  pending_.push_back(std::move(pending));
}

void ShardedEngine::DrainOneReduce() {
  PendingReduce& p = pending_.front();
  const bool ok = Sequence(p.work).ok();
  for (ReducePiece& piece : p.pieces) {
    Unit& unit = units_[piece.unit];
    if (!ok) {
      Retire(piece.staging);  // [Note: failed collective buffers]
      if (piece.direct) Retire(unit.grads);
    } else if (!piece.direct) {
      const int64_t S = unit.plan->shard_numel;
      Fail(device_->AddInto(unit.grads.data(), options_.reduce_dtype,
                            Slice(piece.staging, S, gbytes()), options_.reduce_dtype, S));
    }
  }
  pending_.pop_front();
}

absl::Status ShardedEngine::DrainAll() {
  reduce_bucket_.Flush([this](const std::vector<int>& group) { IssueReduceGroup(group); });
  while (!pending_.empty()) DrainOneReduce();
  for (Unit& unit : units_) FreeGather(unit);
  return status_;
}

void ShardedEngine::BeginEvaluation() {
  ZS_CHECK(orders_ == &train_orders_);  // Not nested.
  for (const Unit& unit : units_) ZS_CHECK(unit.param_refs == 0 && unit.grad_refs == 0);
  orders_ = &eval_orders_;
}

absl::Status ShardedEngine::EndEvaluation() {
  ZS_CHECK(orders_ == &eval_orders_);  // BeginEvaluation first.
  orders_ = &train_orders_;
  eval_orders_.use.EndStep(0);
  eval_orders_.gather.EndStep(0);
  for (const Unit& unit : units_) {
    if (unit.param_refs > 0 || unit.grad_refs > 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("EndEvaluation called while unit '", unit.plan->name, "' is bracketed"));
    }
  }
  ZS_RETURN_IF_ERROR(DrainAll());
  if (params_ == nullptr) return absl::OkStatus();
  return params_->Prefetch(train_orders_.gather.Ahead(options_.params_offload.prefetch));
}

}  // namespace zeroshard
