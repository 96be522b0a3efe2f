#include "worker/engine/shard_updater.h"

#include <memory>
#include <vector>

#include "common/status_macros.h"
#include "worker/comm/control_collectives.h"

namespace zeroshard {

ShardUpdater::ShardUpdater(const EngineContext& ctx, Communicator* control, OptimizerStore* opt,
                           ParamStore* params, const GradientReducer* reducer)
    : ctx_(ctx), control_(control), opt_(opt), params_(params), reducer_(reducer) {}

absl::StatusOr<double> ShardUpdater::GlobalSumSquares() {
  const EngineOptions& o = *ctx_.options;
  // Accumulated on the device; the host reads one double.
  DeviceBuffer acc = ctx_.Buffer(MemoryKind::kBuffers);
  ZS_RETURN_IF_ERROR(acc.Allocate(sizeof(double)));
  for (EngineUnit& unit : *ctx_.units) {
    ZS_RETURN_IF_ERROR(ctx_.device->SumSquaresAccumulate(reducer_->ShardGrad(unit), o.reduce_dtype,
                                                         unit.opt_range.length, acc.as<double>()));
  }
  double sum_sq = 0.0;
  ZS_RETURN_IF_ERROR(ctx_.device->Copy(&sum_sq, acc.data(), sizeof(double)));
  ZS_RETURN_IF_ERROR(ctx_.tracker->AwaitInFlight());
  ZS_RETURN_IF_ERROR(ctx_.device->Synchronize(o.collective_timeout));
  if (ctx_.stage().replicated() || ctx_.world_size == 1) return sum_sq;
  absl::StatusOr<std::vector<double>> global = AllReduceControl(
      *control_, std::vector<double>{sum_sq}, ReduceOp::kSum, o.collective_timeout);
  if (!global.ok()) {
    ctx_.tracker->Fail(global.status());
    return global.status();
  }
  return (*global)[0];
}

absl::Status ShardUpdater::Update(int64_t step, float multiplier) {
  DeviceBuffer grad32 = ctx_.Buffer(MemoryKind::kBuffers);
  std::vector<IssuedWork> gathers;
  for (int u = 0; u < ctx_.num_units(); ++u) {
    absl::Status s = UpdateUnit(u, step, multiplier, grad32);
    if (!s.ok()) {
      ctx_.tracker->AbandonIssued(gathers, s);  // Earlier units' gathers may still write.
      return s;
    }
    if (ctx_.stage().gathers_after_step) {
      EngineUnit& unit = ctx_.unit(u);
      gathers.push_back(
          {ctx_.comm->AllGather(ctx_.ParamsShard(unit), unit.params.data(), unit.plan->shard_numel,
                                ctx_.options->compute_dtype, {ctx_.options->collective_timeout}),
           &unit.params});
    }
  }
  return ctx_.tracker->SequenceEach(gathers);
}

// AdamW on unit u's shard: the new master, and the compute shard written
// where the master is not it (to the parameter store with params offload).
absl::Status ShardUpdater::UpdateUnit(int u, int64_t step, float multiplier, DeviceBuffer& grad32) {
  const EngineOptions& o = *ctx_.options;
  const int num_units = ctx_.num_units();
  EngineUnit& unit = ctx_.unit(u);
  const int64_t n = unit.opt_range.length;
  void* shard_grad = reducer_->ShardGrad(unit);
  const float* g = static_cast<const float*>(shard_grad);
  if (o.reduce_dtype != DType::kFp32) {
    ZS_RETURN_IF_ERROR(grad32.Allocate(n * 4));
    ZS_RETURN_IF_ERROR(
        ctx_.device->Convert(shard_grad, DType::kBf16, grad32.data(), DType::kFp32, n));
    g = grad32.as<float>();
  }
  // The store streams units: u + 1 is read ahead while u is updated. Where
  // the master is the compute shard itself, updating it is the whole write.
  auto update = [&](void* dst) {
    return opt_->Update(u, u + 1 < num_units ? u + 1 : 0, o.adamw, step, multiplier, g,
                        ctx_.master_is_params ? nullptr : dst, o.compute_dtype);
  };
  // With params offload the new shard goes to the parameter store.
  ZS_RETURN_IF_ERROR(params_ != nullptr ? WriteParamShard(u, update)
                                        : update(ctx_.ParamsShard(unit)));
  grad32.Free();  // Stream-ordered on CUDA: after the update that reads it.
  return absl::OkStatus();
}

absl::Status ShardUpdater::WriteParamShard(int u, const std::function<absl::Status(void*)>& fill) {
  ZS_CHECK(params_ != nullptr);
  ZS_ASSIGN_OR_RETURN(void* slot, params_->BeginWrite(u));
  if (ctx_.device->kind() == DeviceKind::kCpu) {
    ZS_RETURN_IF_ERROR(fill(slot));  // Host memory is the device's.
  } else {
    const int64_t bytes = params_->bytes(u);
    DeviceBuffer shard = ctx_.Buffer(MemoryKind::kBuffers);
    ZS_RETURN_IF_ERROR(shard.Allocate(bytes));
    ZS_RETURN_IF_ERROR(fill(shard.data()));
    ZS_RETURN_IF_ERROR(ctx_.device->Copy(slot, shard.data(), bytes));
  }
  // The write thread reads the slot: the device must be done with it.
  ZS_RETURN_IF_ERROR(ctx_.device->Synchronize(ctx_.options->collective_timeout));
  return params_->Commit(u);
}

}  // namespace zeroshard
