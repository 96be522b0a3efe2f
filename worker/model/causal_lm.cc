#include "worker/model/causal_lm.h"

#include "worker/model/gpt_model.h"
#include "worker/model/llama_model.h"

namespace zeroshard {

std::unique_ptr<CausalLm> CreateCausalLm(const ModelConfig& config, ActivationCheckpointing mode,
                                         Kernels& kernels, Device* device) {
  if (config.is_llama()) return std::make_unique<LlamaModel>(config, mode, kernels, device);
  return std::make_unique<GptModel>(config, mode, kernels, device);
}

int64_t ModelActivationBytes(const ModelConfig& config, int batch, int seq_len,
                             ActivationCheckpointing mode) {
  return config.is_llama() ? LlamaActivationBytes(config, batch, seq_len, mode)
                           : GptActivationBytes(config, batch, seq_len, mode);
}

}  // namespace zeroshard
