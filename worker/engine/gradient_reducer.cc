#include "worker/engine/gradient_reducer.h"

#include <algorithm>
#include <utility>

#include "common/status_macros.h"

namespace zeroshard {

GradientReducer::GradientReducer(const EngineContext& ctx)
    : ctx_(ctx),
      reduce_bucket_(ctx.options->bucket_bytes),
      issued_(static_cast<size_t>(ctx.num_units()), 0),
      closes_now_(static_cast<size_t>(ctx.num_units()), 0),
      closes_last_(closes_now_) {}

bool GradientReducer::OverlapsStepReduction() const {
  const GradReduction r = ctx_.stage().reduction;
  return (r == GradReduction::kAllReduceAtStep || r == GradReduction::kReduceScatterAtStep) &&
         ctx_.options->reduce_dtype == DType::kFp32 && ctx_.world_size > 1;
}

float* GradientReducer::Open(int u) {
  EngineUnit& unit = ctx_.unit(u);
  if (!ctx_.stage().shards_grads && ctx_.options->reduce_dtype == DType::kFp32) {
    if (!issued_[u]) return unit.grads.as<float>();  // The model adds straight into it.
    // Its all-reduce is out: this bracket's gradient is reduced apart.
    ctx_.MustAllocate(unit.grad_view, unit.plan->padded_numel * 4);
    return unit.grad_view.as<float>();
  }
  // A gradient still waiting in the reduce bucket takes this bracket's too.
  if (!reduce_bucket_.Take(u)) ctx_.MustAllocate(unit.grad_view, unit.plan->padded_numel * 4);
  return unit.grad_view.as<float>();
}

// At stages 0-1 by adding (when the bracket's buffer is not already the
// resident one); at stages 2-3 by a reduce-scatter of a staging buffer,
// grouped with the reduce bucket's others.
void GradientReducer::Close(int u) {
  EngineUnit& unit = ctx_.unit(u);
  const int64_t P = unit.plan->padded_numel;
  if (!ctx_.stage().shards_grads) {
    if (OverlapsStepReduction() && (sync_ || issued_[u])) {
      CloseForStepReduction(u);
      return;
    }
    if (unit.grad_view.allocated()) {
      ctx_.tracker->Fail(ctx_.device->AddInto(unit.grads.data(), ctx_.options->reduce_dtype,
                                              unit.grad_view.data(), DType::kFp32, P));
      unit.grad_view.Free();
    }
    return;
  }
  reduce_bucket_.Add(u, P * ctx_.gbytes(),
                     [this](const std::vector<int>& group) { IssueReduceGroup(group); });
}

// The unit's last close of the step (as many as the step before) sends its
// gradient; a close after that sends its bracket's buffer. Without a step
// before, nothing goes early: the step all-reduces it, as without overlap,
// so the sums are the same to the bit.
void GradientReducer::CloseForStepReduction(int u) {
  ++closes_now_[u];
  if (issued_[u]) {
    IssueStepReduction(u, /*direct=*/false);
    return;
  }
  // Unknown yet, or used again in this backward.
  if (closes_last_[u] == 0 || closes_now_[u] < closes_last_[u]) return;
  issued_[u] = 1;
  IssueStepReduction(u, /*direct=*/true);
}

// Stage 0 all-reduces the whole buffer in place; stage 1 reduce-scatters
// it in place (the rank's slice then holds the sum), as at the step.
void GradientReducer::IssueStepReduction(int u, bool direct) {
  EngineUnit& unit = ctx_.unit(u);
  PendingReduce pending;
  pending.all_reduce = ctx_.stage().reduction == GradReduction::kAllReduceAtStep;
  ReducePiece piece{u, direct ? ctx_.Buffer(MemoryKind::kBuffers) : ctx_.TakeGradView(unit),
                    direct};
  if (ctx_.tracker->failed()) return;  // Nothing is reduced after a failure.
  const DeviceBuffer& full = direct ? unit.grads : piece.staging;
  const int64_t P = unit.plan->padded_numel, S = unit.plan->shard_numel;
  const CollectiveOptions copts{ctx_.options->collective_timeout};
  pending.work =
      pending.all_reduce
          ? ctx_.comm->AllReduce(full.data(), full.data(), P, DType::kFp32, ReduceOp::kSum, copts)
          : ctx_.comm->ReduceScatter(full.data(), ctx_.Slice(full, S, 4), S, DType::kFp32,
                                     ReduceOp::kSum, copts);
  pending.pieces.push_back(std::move(piece));
  pending_.push_back(std::move(pending));
}

void GradientReducer::IssueReduceGroup(const std::vector<int>& units) {
  // One reduce-scatter in flight (the previous bucket's, overlapping this
  // one's backward): it completes before the next staging is allocated.
  while (!pending_.empty()) DrainOneReduce();
  const DType reduce_dtype = ctx_.options->reduce_dtype;
  PendingReduce pending;
  for (int u : units) {
    EngineUnit& unit = ctx_.unit(u);
    ReducePiece piece{u, ctx_.Buffer(MemoryKind::kBuffers)};
    if (reduce_dtype == DType::kFp32) {
      piece.staging = ctx_.TakeGradView(unit);
    } else {
      ctx_.MustAllocate(piece.staging, unit.plan->padded_numel * 2);
      ctx_.tracker->Fail(ctx_.device->Convert(unit.grad_view.data(), DType::kFp32,
                                              piece.staging.data(), DType::kBf16,
                                              unit.plan->padded_numel));
      unit.grad_view.Free();
    }
    pending.pieces.push_back(std::move(piece));
  }
  if (ctx_.tracker->failed()) return;  // Nothing is reduced after a failure.
  std::vector<CollectiveArgs> args;
  for (ReducePiece& piece : pending.pieces) {
    EngineUnit& unit = ctx_.unit(piece.unit);
    const int64_t S = unit.plan->shard_numel;
    piece.direct = unit.grads_zero;
    unit.grads_zero = false;
    void* recv = piece.direct ? unit.grads.data() : ctx_.Slice(piece.staging, S, ctx_.gbytes());
    args.push_back({piece.staging.data(), recv, S});
  }
  pending.work = ctx_.comm->ReduceScatterGroup(args, reduce_dtype, ReduceOp::kSum,
                                               {ctx_.options->collective_timeout});
  pending_.push_back(std::move(pending));
}

// The slice of a piece not reduced directly is added into the shard
// gradient once the collective completes.
void GradientReducer::DrainOneReduce() {
  PendingReduce& p = pending_.front();
  CollectiveTracker& tracker = *ctx_.tracker;
  const bool ok = tracker.Sequence(p.work).ok();
  for (ReducePiece& piece : p.pieces) {
    EngineUnit& unit = ctx_.unit(piece.unit);
    if (!ok) {
      tracker.Retire(piece.staging);  // [Note: failed collective buffers]
      if (piece.direct) tracker.Retire(unit.grads);
    } else if (!piece.direct) {
      const int64_t S = unit.plan->shard_numel;
      const DType d = ctx_.options->reduce_dtype;
      // Into the reduced gradient (the rank's slice at stage 1, the shard
      // at stages 2-3, all of it at stage 0).
      tracker.Fail(p.all_reduce
                       ? ctx_.device->AddInto(ShardGrad(unit), d, piece.staging.data(), d,
                                              unit.plan->padded_numel)
                       : ctx_.device->AddInto(ShardGrad(unit), d,
                                              ctx_.Slice(piece.staging, S, ctx_.gbytes()), d, S));
    }
  }
  pending_.pop_front();
}

void GradientReducer::Flush() {
  reduce_bucket_.Flush([this](const std::vector<int>& group) { IssueReduceGroup(group); });
  while (!pending_.empty()) DrainOneReduce();
}

void* GradientReducer::ShardGrad(EngineUnit& unit) const {
  if (ctx_.stage().reduction == GradReduction::kReduceScatterAtStep) {
    return ctx_.Slice(unit.grads, unit.plan->shard_numel, ctx_.gbytes());
  }
  return unit.grads.data();  // All of P at stage 0, the shard at stages 2-3.
}

absl::Status GradientReducer::ReduceAtStep() {
  const GradReduction reduction = ctx_.stage().reduction;
  if (reduction == GradReduction::kReduceScatterInBackward) {
    for (EngineUnit& unit : *ctx_.units) {
      if (!unit.grads_zero) continue;
      ZS_RETURN_IF_ERROR(ctx_.device->Memset(unit.grads.data(), 0, unit.grads.bytes()));
    }
    return absl::OkStatus();
  }
  const CollectiveOptions copts{ctx_.options->collective_timeout};
  const DType d = ctx_.options->reduce_dtype;
  std::vector<std::unique_ptr<Work>> works;
  for (int u = 0; u < ctx_.num_units(); ++u) {
    if (issued_[u]) continue;  // All-reduced as its backward ended.
    EngineUnit& unit = ctx_.unit(u);
    const int64_t S = unit.plan->shard_numel;
    void* g = unit.grads.data();
    works.push_back(
        reduction == GradReduction::kAllReduceAtStep
            ? ctx_.comm->AllReduce(g, g, unit.plan->padded_numel, d, ReduceOp::kSum, copts)
            : ctx_.comm->ReduceScatter(g, ctx_.Slice(unit.grads, S, ctx_.gbytes()), S, d,
                                       ReduceOp::kSum, copts));
  }
  for (std::unique_ptr<Work>& w : works) {
    if (absl::Status s = ctx_.tracker->Sequence(w); !s.ok()) {
      // [Note: failed collective buffers]
      for (EngineUnit& unit : *ctx_.units) ctx_.tracker->Retire(unit.grads);
      return s;
    }
  }
  return absl::OkStatus();
}

void GradientReducer::Zero() {
  closes_last_ = closes_now_;
  std::fill(closes_now_.begin(), closes_now_.end(), 0);
  std::fill(issued_.begin(), issued_.end(), 0);
  for (EngineUnit& unit : *ctx_.units) {
    if (ctx_.stage().reduction == GradReduction::kReduceScatterInBackward) {
      unit.grads_zero = true;  // The next reduce-scatter overwrites them.
    } else {
      ctx_.tracker->Fail(ctx_.device->Memset(unit.grads.data(), 0, unit.grads.bytes()));
    }
  }
}

bool GradientReducer::Settle(absl::Duration wait) {
  bool all = true;
  for (PendingReduce& p : pending_) all = SettleWork(p.work, wait) && all;
  return all;
}

void GradientReducer::RetirePending() {
  for (PendingReduce& p : pending_) {
    for (ReducePiece& piece : p.pieces) {
      ctx_.tracker->Keep(std::move(piece.staging));
      if (piece.direct) ctx_.tracker->Keep(std::move(ctx_.unit(piece.unit).grads));
    }
  }
  pending_.clear();
}

}  // namespace zeroshard
