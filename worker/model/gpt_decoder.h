// KvDecoder of the gpt2 family (gpt_model.h's formulas and layout):
// learned positions at each token's own position, pre-LayerNorm blocks with
// a fused q/k/v projection, multi-head attention over the cache, a GELU MLP,
// the final LayerNorm and the head tied to the token embedding.
#pragma once

#include "worker/model/kv_decoder.h"
#include "worker/model/model_layout.h"

namespace zeroshard {

class GptDecoder final : public KvDecoder {
 public:
  GptDecoder(const ModelConfig& config, const DecodeTarget& target);

 private:
  absl::Status Run(const int32_t* tokens, int n, const float** logits) override;
  void Block(int layer, int n);

  const GptLayout layout_;
  // The new tokens' activations (ModelRuntime's arena).
  ModelArray x_, ln_, qkv_, att_, res_, fc_, gelu_, mean_, rstd_, logits_;
};

}  // namespace zeroshard
