// KvDecoder of the gpt2 family (gpt_model.h's formulas and layout):
// learned positions at each token's own position, pre-LayerNorm blocks with
// a fused q/k/v projection, multi-head attention over the cache, a GELU MLP,
// the final LayerNorm and the head tied to the token embedding.
#pragma once

#include <vector>

#include "worker/model/kernels.h"
#include "worker/model/kv_cache.h"
#include "worker/model/kv_decoder.h"
#include "worker/model/model_layout.h"

namespace zeroshard {

class GptDecoder final : public KvDecoder {
 public:
  GptDecoder(const ModelConfig& config, const std::vector<std::vector<float>>& units);

 private:
  void Run(absl::Span<const int32_t> tokens, std::vector<float>* logits) override;
  void Block(int layer, int n);

  const std::vector<std::vector<float>>& units_;
  Kernels& k_;
  const GptLayout layout_;
  KvCache cache_;
  // Scratch for the new tokens.
  std::vector<float> x_, ln_, qkv_, att_, res_, fc_, gelu_, mean_, rstd_;
};

}  // namespace zeroshard
