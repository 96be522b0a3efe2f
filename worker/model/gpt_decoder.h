// KvDecoder of the gpt2 family (gpt_model.h's formulas and layout):
// learned positions at each token's own position, pre-LayerNorm blocks with
// a fused q/k/v projection, multi-head attention over the cache, a GELU MLP,
// the final LayerNorm and the head tied to the token embedding.
#pragma once

#include <vector>

#include "worker/model/kernels.h"
#include "worker/model/kv_cache.h"
#include "worker/model/kv_decoder.h"

namespace zeroshard {

class GptDecoder final : public KvDecoder {
 public:
  GptDecoder(const ModelConfig& config, const std::vector<std::vector<float>>& units);

 private:
  struct Offsets {
    int64_t ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fcproj_w,
        fcproj_b;
  };
  void Run(absl::Span<const int32_t> tokens, std::vector<float>* logits) override;
  void Block(int layer, int n);

  const std::vector<std::vector<float>>& units_;
  Kernels& k_;
  Offsets o_{};
  int64_t wte_ = 0, wpe_ = 0, lnf_w_ = 0, lnf_b_ = 0;
  KvCache cache_;
  // Scratch for the new tokens.
  std::vector<float> x_, ln_, qkv_, att_, res_, fc_, gelu_, mean_, rstd_;
};

}  // namespace zeroshard
