// Incremental decoding of the Llama family with a KV cache, for generation:
// each call runs only the new tokens through the model, their keys and
// values appended to a per-layer cache of the earlier positions', so a
// token's cost does not grow with the whole sequence's recomputation
// (attention still reads the cached positions: linear in the length).
// Same formulas and parameter layout as LlamaModel (llama_model.h), on the
// CPU kernels: the attention of new queries against the cache is two
// matrix-vector products a head (the kernels' sgemm), softmax in double.
//
// Not thread-safe: one generation per decoder.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/model_config.h"
#include "worker/model/kernels.h"
#include "worker/model/rope_table.h"

namespace zeroshard {

class LlamaDecoder {
 public:
  // `units`: every unit's full fp32 parameters (ModelUnits(config)'s
  // layout, as LocalParams holds them); must outlive the decoder. The cache
  // holds config.n_ctx positions.
  LlamaDecoder(const ModelConfig& config, const std::vector<std::vector<float>>& units);

  // Runs `tokens` at the next positions and writes the last one's logits
  // [vocab] to *logits. INVALID_ARGUMENT for no tokens, an id outside the
  // vocabulary, or past the cache's n_ctx positions (nothing runs then).
  absl::Status Append(absl::Span<const int32_t> tokens, std::vector<float>* logits);
  int position() const { return pos_; }

 private:
  struct Offsets {
    int64_t ln1, q_w, k_w, v_w, q_b, k_b, v_b, q_norm, k_norm, o_w, o_b, ln2, gate_up, down;
  };
  void Block(int layer, int n);
  void Project(const float* p, int n);
  void Attend(int layer, int n);

  const ModelConfig config_;
  const std::vector<std::vector<float>>& units_;
  Kernels& k_;
  Offsets o_{};
  int64_t embed_ = 0, norm_ = 0, head_w_ = 0;
  RopeTables rope_;
  int pos_ = 0;
  std::vector<std::vector<float>> cache_k_, cache_v_;  // Per layer [KV, n_ctx, D].
  // Scratch for n new tokens.
  std::vector<float> x_, ln_, q_, qn_, k_new_, kn_, v_new_, att_, res_, gu_, act_, rstd_, lnf_,
      scores_;
};

}  // namespace zeroshard
