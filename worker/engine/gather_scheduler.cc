#include "worker/engine/gather_scheduler.h"

#include <algorithm>
#include <memory>

#include "common/status_macros.h"

namespace zeroshard {
namespace {

GatherOrder NewOrder(const EngineContext& ctx) { return GatherOrder(ctx.num_units()); }

}  // namespace

GatherScheduler::GatherScheduler(const EngineContext& ctx, ParamStore* params)
    : ctx_(ctx),
      params_(params),
      train_orders_{NewOrder(ctx), NewOrder(ctx)},
      eval_orders_(train_orders_) {
  // The gather buckets weigh each unit's gathered compute copy.
  std::vector<int64_t> gathered_bytes;
  for (const UnitPlan& u : ctx_.plan->units)
    gathered_bytes.push_back(u.padded_numel * ctx_.cbytes());
  for (Orders* orders : {&train_orders_, &eval_orders_}) {
    orders->use.SetBuckets(gathered_bytes, ctx_.options->bucket_bytes);
  }
}

void GatherScheduler::IssueGathers(const std::vector<int>& group) {
  if (group.empty()) return;
  CollectiveTracker& tracker = *ctx_.tracker;
  std::vector<CollectiveArgs> args;
  for (int u : group) {
    EngineUnit& unit = ctx_.unit(u);
    // Zeros where nothing will be gathered: the model unwinds, Step reports
    // the error. Otherwise the gather overwrites every byte.
    ctx_.MustAllocate(unit.gathered, unit.plan->padded_numel * ctx_.cbytes(),
                      /*zeroed=*/tracker.failed());
    if (tracker.failed()) continue;
    const int64_t S = unit.plan->shard_numel;
    const void* send = unit.params.data();
    if (params_ != nullptr) {
      // In place: the rank's slice of the gather buffer is the send buffer.
      uint8_t* mine = ctx_.Slice(unit.gathered, S, ctx_.cbytes());
      if (absl::Status s = StageParamShard(u, mine); !s.ok()) {
        ctx_.comm->Abort();  // The peers would wait for this rank's gather.
        tracker.Fail(s);
        continue;
      }
      send = mine;
    }
    args.push_back({send, unit.gathered.data(), S});
  }
  if (tracker.failed()) {
    for (int u : group) {
      ctx_.MustAllocate(ctx_.unit(u).gathered, ctx_.unit(u).gathered.bytes());  // Zeros.
    }
    return;
  }
  auto gather = std::make_shared<GatherWork>();
  gather->work = ctx_.comm->AllGatherGroup(args, ctx_.options->compute_dtype,
                                           {ctx_.options->collective_timeout});
  for (int u : group) ctx_.unit(u).gather = gather;
}

// Gathered units outside the open ones and the window are freed first (a
// prefetch the model did not take, once the order stops expecting it), so
// at most (1 + prefetch) buckets are ever gathered; then the open unit with
// the rest of its bucket, in one op; then the window's next buckets, one op
// each.
void GatherScheduler::GatherWindow(int u) {
  const int prefetch = ctx_.options->prefetch;
  orders_->use.Record(u, prefetch);
  const std::vector<std::vector<int>> window = orders_->use.WindowBuckets(prefetch);
  auto ungathered = [&](const std::vector<int>& bucket, std::vector<int> group) {
    for (int w : bucket) {
      const EngineUnit& unit = ctx_.unit(w);
      if (!unit.gathered.allocated() && unit.param_refs == 0 &&
          std::find(group.begin(), group.end(), w) == group.end()) {
        group.push_back(w);
      }
    }
    return group;
  };
  for (int w = 0; w < ctx_.num_units(); ++w) {
    EngineUnit& other = ctx_.unit(w);
    if (other.param_refs == 0 && other.gathered.allocated() && !orders_->use.Expects(w, prefetch)) {
      FreeGather(other);
    }
  }
  IssueGathers(ungathered(
      window[0], ctx_.unit(u).gathered.allocated() ? std::vector<int>{} : std::vector<int>{u}));
  for (size_t b = 1; b < window.size(); ++b) IssueGathers(ungathered(window[b], {}));
}

const void* GatherScheduler::Open(int u) {
  EngineUnit& unit = ctx_.unit(u);
  GatherWindow(u);  // Prefetches issued before the wait for u's, to overlap it.
  if (!SettleGather(unit, /*on_stream=*/true)) {
    ctx_.MustAllocate(unit.gathered, unit.plan->padded_numel * ctx_.cbytes());
  }
  return unit.gathered.data();
}

bool GatherScheduler::SettleGather(EngineUnit& unit, bool on_stream) {
  const std::shared_ptr<GatherWork> gather = std::move(unit.gather);
  unit.gather = nullptr;
  if (gather == nullptr) return true;
  if (gather->work != nullptr) {
    CollectiveTracker& tracker = *ctx_.tracker;
    const absl::Status s = on_stream ? tracker.Sequence(gather->work) : tracker.Await(gather->work);
    if (!s.ok()) gather->failed = true;
  }
  if (!gather->failed) return true;
  ctx_.tracker->Retire(unit.gathered);  // [Note: failed collective buffers]
  return false;
}

void GatherScheduler::FreeGather(EngineUnit& unit) {
  SettleGather(unit, /*on_stream=*/false);
  if (unit.param_refs == 0) unit.gathered.Free();
}

bool GatherScheduler::KeepGathered(int u) const {
  return ctx_.stage().shards_params && orders_->use.Expects(u, ctx_.options->prefetch);
}

void GatherScheduler::Close(int u) {
  EngineUnit& unit = ctx_.unit(u);
  if (unit.gather == nullptr && !KeepGathered(u)) unit.gathered.Free();
}

void GatherScheduler::FreeAll() {
  for (int u = 0; u < ctx_.num_units(); ++u) FreeGather(ctx_.unit(u));
}

void GatherScheduler::BeginEvaluation() {
  ZS_CHECK(orders_ == &train_orders_);  // Not nested.
  orders_ = &eval_orders_;
}

void GatherScheduler::EndEvaluation() {
  ZS_CHECK(orders_ == &eval_orders_);  // BeginEvaluation first.
  orders_ = &train_orders_;
  eval_orders_.use.EndStep(0);
  eval_orders_.gather.EndStep(0);
}

absl::Status GatherScheduler::PrefetchTrainingOrder() {
  if (params_ == nullptr) return absl::OkStatus();
  return params_->Prefetch(train_orders_.gather.Ahead(ctx_.options->params_offload.prefetch));
}

absl::Status GatherScheduler::StageParamShard(int u, void* dst) {
  ZS_CHECK(params_ != nullptr);
  ZS_ASSIGN_OR_RETURN(const void* slot, params_->Acquire(u));
  ZS_RETURN_IF_ERROR(ctx_.device->Copy(dst, slot, params_->bytes(u)));
  // The slot may be reused by the reads issued next: the copy must be done.
  ZS_RETURN_IF_ERROR(ctx_.device->Synchronize(ctx_.options->collective_timeout));
  return params_->Prefetch(orders_->gather.Record(u, ctx_.options->params_offload.prefetch));
}

absl::Status GatherScheduler::EndStep() {
  orders_->use.EndStep(0);
  const std::vector<int> next = orders_->gather.EndStep(ctx_.options->params_offload.prefetch);
  return params_ == nullptr ? absl::OkStatus() : params_->Prefetch(next);
}

bool GatherScheduler::Settle(absl::Duration wait) {
  bool lost = false;
  for (int u = 0; u < ctx_.num_units(); ++u) {
    EngineUnit& unit = ctx_.unit(u);
    if (unit.gather == nullptr) continue;
    // A group another member already waited for in vain counts as lost too.
    if (!SettleWork(unit.gather->work, wait) || unit.gather->failed) lost = true;
  }
  return !lost;
}

}  // namespace zeroshard
