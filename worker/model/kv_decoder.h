// Incremental decoding for generation: each Append runs only the new tokens
// through the model, attending to a KV cache of the earlier positions
// (kv_cache.h), so a token's cost does not include recomputing the
// sequence. One implementation per family over the CPU kernels, with the
// formulas and parameter layouts of the training models: GptDecoder
// (gpt_model.h) and LlamaDecoder (llama_model.h).
//
// Not thread-safe: one generation per decoder.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/model_config.h"

namespace zeroshard {

class KvDecoder {
 public:
  virtual ~KvDecoder() = default;
  // Runs `tokens` at the next positions and writes the last one's logits
  // [vocab] to *logits. INVALID_ARGUMENT for no tokens, an id outside the
  // vocabulary, or past config().n_ctx positions (nothing runs then).
  absl::Status Append(absl::Span<const int32_t> tokens, std::vector<float>* logits);
  int position() const { return pos_; }
  const ModelConfig& config() const { return config_; }

 protected:
  explicit KvDecoder(const ModelConfig& config) : config_(config) {}
  // The family's pass over n new tokens at position pos_ (checked).
  virtual void Run(absl::Span<const int32_t> tokens, std::vector<float>* logits) = 0;

  const ModelConfig config_;
  int pos_ = 0;
};

// The decoder of `config`'s family. `units`: every unit's full fp32
// parameters (ModelUnits(config)'s layout, as LocalParams holds them); they
// must outlive the decoder. The cache holds config.n_ctx positions.
std::unique_ptr<KvDecoder> CreateKvDecoder(const ModelConfig& config,
                                           const std::vector<std::vector<float>>& units);

}  // namespace zeroshard
