// KvDecoder of the Llama family (llama_model.h's formulas and layout):
// RMSNorm, q/k/v projections (biases, per-head norms where configured),
// rotary positions at each token's own position, grouped-query attention
// over the cache, SwiGLU, the final norm and the (tied or untied) head.
#pragma once

#include <vector>

#include "worker/model/kernels.h"
#include "worker/model/kv_cache.h"
#include "worker/model/kv_decoder.h"
#include "worker/model/rope_table.h"

namespace zeroshard {

class LlamaDecoder final : public KvDecoder {
 public:
  LlamaDecoder(const ModelConfig& config, const std::vector<std::vector<float>>& units);

 private:
  struct Offsets {
    int64_t ln1, q_w, k_w, v_w, q_b, k_b, v_b, q_norm, k_norm, o_w, o_b, ln2, gate_up, down;
  };
  void Run(absl::Span<const int32_t> tokens, std::vector<float>* logits) override;
  void Block(int layer, int n);
  void Project(const float* p, int n);

  const std::vector<std::vector<float>>& units_;
  Kernels& k_;
  Offsets o_{};
  int64_t embed_ = 0, norm_ = 0, head_w_ = 0;
  RopeTables rope_;
  KvCache cache_;
  // Scratch for the new tokens.
  std::vector<float> x_, ln_, q_, qn_, k_new_, kn_, v_new_, att_, res_, gu_, act_, rstd_, lnf_;
};

}  // namespace zeroshard
