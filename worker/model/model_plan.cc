#include "worker/model/model_plan.h"

#include <algorithm>

#include "common/status_macros.h"
#include "worker/model/causal_lm.h"
#include "worker/model/kernels.h"

namespace zeroshard {

std::vector<UnitBracket> ModelBrackets(const ModelConfig& config, ActivationCheckpointing) {
  std::vector<UnitBracket> b;
  if (config.is_llama()) {  // llama_model.h "Hook order": the head runs in one backward bracket.
    for (int i = 0; i <= config.n_layer; ++i) b.push_back({i, false});
    b.push_back({config.head_unit(), true});
    for (int i = config.n_layer; i >= 0; --i) b.push_back({i, true});
    return b;
  }
  b.push_back({0, false});  // Embedding lookup.
  for (int i = 1; i <= config.n_layer; ++i) b.push_back({i, false});
  b.push_back({0, false});  // ln_f + tied head.
  b.push_back({0, true});   // Head + ln_f.
  for (int i = config.n_layer; i >= 1; --i) b.push_back({i, true});
  b.push_back({0, true});  // Embedding.
  return b;
}

int MicroBatchesPerStep(int global_batch, int workers, int micro_batch) {
  const int widest = (global_batch + workers - 1) / workers;
  return std::max(1, (std::max(1, widest) + micro_batch - 1) / micro_batch);
}

PlanModel MakePlanModel(const ModelConfig& config, int micro_batch, int seq_len, int micro_batches,
                        DType compute_dtype, DType reduce_dtype, bool cuda) {
  PlanModel m;
  m.units = ModelUnits(config);
  m.params = ModelParamCount(config);
  m.alignment = kDefaultShardAlignment;  // As the coordinator plans.
  m.compute_dtype = compute_dtype;
  m.reduce_dtype = reduce_dtype;
  m.micro_batches = micro_batches;
  // The initial values of one unit at a time (engine_setup.h InitialUnits):
  // the largest unit's numel, as the shard plan counts it.
  absl::StatusOr<ShardPlan> plan = MakeShardPlan(m.units, 1, 1);
  ZS_CHECK(plan.ok());  // The model's own units always plan.
  int64_t largest = 0;
  for (const UnitPlan& u : plan->units) largest = std::max(largest, u.numel);
  m.worker_host_bytes = 4 * largest;
  const ActivationCheckpointing modes[2] = {ActivationCheckpointing::kNone,
                                            ActivationCheckpointing::kBlocks};
  for (int k = 0; k < 2; ++k) {
    m.brackets[k] = ModelBrackets(config, modes[k]);
    m.activation_bytes[k] =
        ModelActivationBytes(config, micro_batch, seq_len, modes[k]) +
        (cuda ? ModelKernelsScratchBytes(DeviceKind::kCuda, config, micro_batch, seq_len) : 0);
  }
  return m;
}

int64_t ModelKernelsScratchBytes(DeviceKind kind, const ModelConfig& model, int B, int T) {
  if (kind == DeviceKind::kCpu) return CpuKernelsScratchBytes();
  // Attention's width is NH D (C for gpt2).
  const int64_t bt = int64_t{B} * T, C = int64_t{model.n_head} * model.head_size();
  const int64_t attention = 7 * bt * C + int64_t{B} * model.n_head * T * T;
  // Every matmul's M K + K N is at most (B T + C) W + B T C, W = max(4C, 2I, V).
  const int64_t wide = std::max<int64_t>(
      {4 * C, 2 * int64_t{model.n_inner}, model.vocab, 4 * int64_t{model.n_embd}});
  const int64_t bf16_matmul = ((bt + C) * wide + bt * C + 1) / 2 + 16;  // + B's alignment.
  return 4 * std::max(attention, bf16_matmul);
}

}  // namespace zeroshard
