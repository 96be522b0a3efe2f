#include "worker/model/kv_decoder.h"

#include "absl/strings/str_cat.h"
#include "worker/model/gpt_decoder.h"
#include "worker/model/llama_decoder.h"

namespace zeroshard {

absl::Status KvDecoder::Append(absl::Span<const int32_t> tokens, std::vector<float>* logits) {
  const int n = static_cast<int>(tokens.size());
  if (n == 0) return absl::InvalidArgumentError("no tokens to append");
  if (pos_ + n > config_.n_ctx) {
    return absl::InvalidArgumentError(
        absl::StrCat("position ", pos_ + n, " is past the ", config_.n_ctx, " the cache holds"));
  }
  for (int32_t t : tokens) {
    if (t < 0 || t >= config_.vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("token ", t, " is outside [0, ", config_.vocab, ")"));
    }
  }
  Run(tokens, logits);
  pos_ += n;
  return absl::OkStatus();
}

std::unique_ptr<KvDecoder> CreateKvDecoder(const ModelConfig& config,
                                           const std::vector<std::vector<float>>& units) {
  if (config.is_llama()) return std::make_unique<LlamaDecoder>(config, units);
  return std::make_unique<GptDecoder>(config, units);
}

}  // namespace zeroshard
