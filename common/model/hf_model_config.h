// A Hugging Face model directory's config.json as zeroshard's model
// description (common/model/model_config.h, family llama). Accepted model_type:
// llama, mistral, qwen2, qwen3. Both key styles load: transformers 4's
// (rope_theta, rope_scaling, torch_dtype) and transformers 5's
// (rope_parameters, dtype).
//
// Read: hidden_size, num_hidden_layers, num_attention_heads,
// num_key_value_heads (default: the heads), head_dim (default: hidden /
// heads), intermediate_size, vocab_size, rms_norm_eps, rope theta and
// scaling (default or llama3), tie_word_embeddings (default false),
// attention_bias (llama, qwen3: q/k/v/o biases), qwen2's q/k/v biases,
// qwen3's QK-norm, max_position_embeddings.
// Refused, with INVALID_ARGUMENT "config.json: <key> = <value>: <why>": an
// unknown model_type or hidden_act (only silu), a rope type other than
// default/llama3, mlp_bias, a sliding window shorter than the training
// context (a window at least as long masks nothing), a layer_types entry
// other than full_attention, a missing or non-numeric size.
// Thread-safe: pure functions (ReadHfModelConfig reads one file).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "common/model/model_config.h"

namespace zeroshard {

// The training context when the job names none: the model's
// max_position_embeddings, at most this many tokens.
inline constexpr int kDefaultHfContext = 1024;

// `json`: config.json's text. `n_ctx` > 0: the longest sequence to train
// on (at most max_position_embeddings); 0: the default above. The result's
// hf_config_json is `json`.
absl::StatusOr<ModelConfig> ParseHfModelConfig(const std::string& json, int n_ctx);

// `dir`/config.json, read and parsed; NOT_FOUND naming the path when absent.
absl::StatusOr<ModelConfig> ReadHfModelConfig(const std::string& dir, int n_ctx);

// True when `path` is a directory holding config.json.
bool IsHfModelDir(const std::string& path);

}  // namespace zeroshard
