#include "worker/trainer/engine_setup.h"

#include <algorithm>
#include <memory>

#include "common/status_macros.h"
#include "worker/model/causal_lm.h"
#include "worker/model/model_init.h"
#include "worker/model/model_plan.h"
#include "worker/optim/job_adamw.h"
#include "worker/trainer/cpu_reserve.h"
#include "worker/trainer/generation_trainer.h"

namespace zeroshard {

ShardedEngine::UnitInit InitialUnits(const JobConfig& job, const ModelConfig& model) {
  absl::StatusOr<ShardPlan> made = MakeShardPlan(ModelUnits(model), 1, 1);
  ZS_CHECK(made.ok());  // The model's own units always plan.
  auto plan = std::make_shared<const ShardPlan>(*std::move(made));
  return [pretrained = job.loads_model_weights(), seed = job.seed, model, plan](
             int u, std::vector<float>* values) {
    const UnitPlan& unit = plan->units[u];
    if (pretrained) {
      values->assign(unit.numel, 0.0f);
    } else {
      *values = InitUnit(model, unit, u, seed);
    }
    return absl::OkStatus();
  };
}

EngineOptions MakeEngineOptions(const JobConfig& job, const ModelConfig& model, Device* device,
                                const ModelKernels& kernels, Communicator* control) {
  EngineOptions o;
  // The model's activations and its kernels' scratch share the device's
  // memory with the engine (host memory on the CPU, with the late mappings);
  // scratch an earlier generation's kernels already hold is in use already.
  const int64_t scratch =
      ModelKernelsScratchBytes(device->kind(), model, job.micro_batch, model.n_ctx);
  o.reserved_bytes =
      ModelActivationBytes(model, job.micro_batch, model.n_ctx, JobActivationCheckpointing(job)) +
      std::max<int64_t>(0, scratch - kernels.scratch_held());
  if (device->kind() == DeviceKind::kCpu) o.reserved_bytes += LateMappingBytes(job);
  o.stage = job.stage;
  o.compute_dtype = job.compute_dtype;
  o.reduce_dtype = job.reduce_dtype;
  o.adamw = JobAdamW(job);
  o.max_grad_norm = static_cast<float>(job.max_grad_norm);
  o.optimizer_threads = job.threads;
  o.collective_timeout = job.collective_timeout();
  o.device = device;
  o.control_comm = control;
  o.offload.target = job.offload_optimizer == OptimizerOffload::kHost   ? OffloadTarget::kHost
                     : job.offload_optimizer == OptimizerOffload::kNvme ? OffloadTarget::kNvme
                                                                        : OffloadTarget::kDevice;
  o.offload.dir = job.offload_dir;
  o.params_offload.enabled = job.offload_params == ParamsOffload::kNvme;
  o.params_offload.dir = job.offload_dir;
  o.params_offload.prefetch = job.offload_prefetch;
  o.prefetch = job.gather_prefetch;
  o.bucket_bytes = job.bucket_bytes();
  return o;
}

}  // namespace zeroshard
