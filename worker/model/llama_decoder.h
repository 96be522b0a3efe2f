// KvDecoder of the Llama family (llama_model.h's formulas and layout):
// RMSNorm, q/k/v projections (biases, per-head norms where configured),
// rotary positions at each token's own position, grouped-query attention
// over the cache, SwiGLU, the final norm and the (tied or untied) head.
#pragma once

#include <vector>

#include "worker/model/kernels.h"
#include "worker/model/kv_cache.h"
#include "worker/model/kv_decoder.h"
#include "worker/model/model_layout.h"
#include "worker/model/rope_table.h"

namespace zeroshard {

class LlamaDecoder final : public KvDecoder {
 public:
  LlamaDecoder(const ModelConfig& config, const std::vector<std::vector<float>>& units);

 private:
  void Run(absl::Span<const int32_t> tokens, std::vector<float>* logits) override;
  void Block(int layer, int n);
  void Project(const float* p, int n);

  const std::vector<std::vector<float>>& units_;
  Kernels& k_;
  const LlamaLayout layout_;
  RopeTables rope_;
  KvCache cache_;
  // Scratch for the new tokens.
  std::vector<float> x_, ln_, q_, qn_, k_new_, kn_, v_new_, att_, res_, gu_, act_, rstd_, lnf_;
};

}  // namespace zeroshard
