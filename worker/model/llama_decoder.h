// KvDecoder of the Llama family (llama_model.h's formulas and layout):
// RMSNorm, q/k/v projections (biases, per-head norms where configured),
// rotary positions at each token's own position, grouped-query attention
// over the cache, SwiGLU, the final norm and the (tied or untied) head.
#pragma once

#include "worker/model/kv_decoder.h"
#include "worker/model/model_layout.h"
#include "worker/model/rope_table.h"

namespace zeroshard {

class LlamaDecoder final : public KvDecoder {
 public:
  LlamaDecoder(const ModelConfig& config, const DecodeTarget& target);

 private:
  absl::Status PlaceTables() override;
  absl::Status Run(const int32_t* tokens, int n, const float** logits) override;
  void Block(int layer, int n);
  void Project(const float* p, int n);

  const LlamaLayout layout_;
  const RopeTables rope_;             // Host tables for the cache's positions.
  DeviceBuffer cos_held_, sin_held_;  // Their copies off the CPU.
  const float* cos_ = nullptr;
  const float* sin_ = nullptr;
  // The new tokens' activations (ModelRuntime's arena).
  ModelArray x_, ln_, q_, qn_, k_new_, kn_, v_new_, att_, res_, gu_, act_, rstd_, logits_;
};

}  // namespace zeroshard
