#include "tests/engine/engine_runner.h"

#include <thread>

#include "common/status_macros.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/in_memory_store.h"
#include "worker/engine/host_hooks.h"

namespace zeroshard::testing {

EngineOptions MakeEngineOptions(const RunConfig& config, const RefAdamW& hp) {
  EngineOptions o;
  o.stage = config.stage;
  o.compute_dtype = config.compute;
  o.reduce_dtype = config.reduce;
  o.adamw = {static_cast<float>(hp.lr), static_cast<float>(hp.beta1), static_cast<float>(hp.beta2),
             static_cast<float>(hp.eps), static_cast<float>(hp.weight_decay)};
  o.max_grad_norm = static_cast<float>(hp.max_grad_norm);
  o.collective_timeout = absl::Seconds(20);
  o.optimizer_threads = 1;
  o.device = config.device;
  o.control_comm = config.control_comm;
  o.offload = config.offload;
  o.params_offload = config.params_offload;
  o.bucket_bytes = config.bucket_bytes;
  return o;
}

absl::Status RunRanksAsThreads(int n, const std::string& prefix,
                               const std::function<absl::Status(int, Communicator*)>& fn) {
  InMemoryStore store;
  std::vector<absl::Status> statuses(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<Communicator>> comm =
          CreateGlooCommunicator(store, prefix, r, n, {"127.0.0.1", absl::Seconds(20)});
      statuses[r] = comm.ok() ? fn(r, comm->get()) : comm.status();
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : statuses) ZS_RETURN_IF_ERROR(s);
  return absl::OkStatus();
}

absl::StatusOr<RankResult> TrainRank(const MlpDims& dims, const RefAdamW& hp,
                                     const RunConfig& config, Communicator* comm) {
  const int n = comm->world_size(), rank = comm->rank();
  ZS_ASSIGN_OR_RETURN(ShardPlan plan, MakeShardPlan(MlpUnits(dims), n, config.alignment));
  ZS_ASSIGN_OR_RETURN(
      std::unique_ptr<ShardedEngine> engine,
      ShardedEngine::Create(plan, comm, MakeEngineOptions(config, hp), MlpInit(plan, 42)));
  std::unique_ptr<HostHooks> hooks;
  if (config.via_host_hooks || engine->device().kind() != DeviceKind::kCpu) {
    hooks = std::make_unique<HostHooks>(plan, &engine->device(), engine.get());
  }
  const int per_rank = config.global_batch / n;
  const int per_micro = per_rank / config.micro_batches;
  if (per_rank * n != config.global_batch || per_micro * config.micro_batches != per_rank) {
    return absl::InvalidArgumentError(
        "global_batch must split evenly over ranks and micro-batches");
  }
  RankResult out;
  for (int step = 1; step <= config.steps; ++step) {
    for (int mb = 0; mb < config.micro_batches; ++mb) {
      engine->set_gradient_sync(config.sync_every_micro_batch || mb + 1 == config.micro_batches);
      std::vector<Sample> batch;
      for (int k = 0; k < per_micro; ++k) {
        batch.push_back(MakeSample(dims, step, rank * per_rank + mb * per_micro + k));
      }
      if (hooks != nullptr) {
        MlpForwardBackward(dims, plan, *hooks, batch);
      } else {
        MlpForwardBackward(dims, plan, *engine, batch);
      }
    }
    ZS_ASSIGN_OR_RETURN(StepResult result, engine->Step(1.0f / config.micro_batches));
    if (result.skipped) return absl::InternalError("step skipped (non-finite gradient)");
    out.grad_norms.push_back(result.grad_norm);
  }
  for (int u = 0; u < static_cast<int>(plan.units.size()); ++u) {
    ZS_ASSIGN_OR_RETURN(std::vector<float> full, engine->GatherFullParams(u));
    out.params.push_back(std::move(full));
  }
  return out;
}

}  // namespace zeroshard::testing
