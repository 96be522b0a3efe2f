#include "worker/model/model_plan.h"

#include <algorithm>

#include "worker/model/gpt_model.h"

namespace zeroshard {

std::vector<UnitBracket> ModelBrackets(const ModelConfig& config, ActivationCheckpointing) {
  std::vector<UnitBracket> b;
  b.push_back({0, false});  // Embedding lookup.
  for (int i = 1; i <= config.n_layer; ++i) b.push_back({i, false});
  b.push_back({0, false});  // ln_f + tied head.
  b.push_back({0, true});   // Head + ln_f.
  for (int i = config.n_layer; i >= 1; --i) b.push_back({i, true});
  b.push_back({0, true});   // Embedding.
  return b;
}

int MicroBatchesPerStep(int global_batch, int workers, int micro_batch) {
  const int widest = (global_batch + workers - 1) / workers;
  return std::max(1, (std::max(1, widest) + micro_batch - 1) / micro_batch);
}

PlanModel MakePlanModel(const ModelConfig& config, int micro_batch, int seq_len,
                        int micro_batches, DType compute_dtype, DType reduce_dtype) {
  PlanModel m;
  m.units = ModelUnits(config);
  m.params = ModelParamCount(config);
  m.alignment = kDefaultShardAlignment;  // As the coordinator plans.
  m.compute_dtype = compute_dtype;
  m.reduce_dtype = reduce_dtype;
  m.micro_batches = micro_batches;
  m.worker_host_bytes = ModelParamBytes(config);  // The initial units (InitUnits).
  const ActivationCheckpointing modes[2] = {ActivationCheckpointing::kNone,
                                            ActivationCheckpointing::kBlocks};
  for (int k = 0; k < 2; ++k) {
    m.brackets[k] = ModelBrackets(config, modes[k]);
    m.activation_bytes[k] = ModelActivationBytes(config, micro_batch, seq_len, modes[k]);
  }
  return m;
}

}  // namespace zeroshard
