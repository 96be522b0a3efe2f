// ParseHfModelConfig on hand-written config.json texts in both transformers
// key styles, its defaults, each family's biases and norms, and each
// refusal (INVALID_ARGUMENT naming the key, so a user knows what to change);
// then ModelConfig's JSON round trip and a llama config's units by hand.
#include "common/model/hf_model_config.h"

#include <algorithm>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace zeroshard {
namespace {

using Json = nlohmann::json;

// transformers 5 (Llama 3.2-like): rope_parameters holds theta and scaling.
constexpr char kLlamaV5[] = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "dtype": "bfloat16",
  "hidden_size": 24, "num_hidden_layers": 3, "num_attention_heads": 6,
  "num_key_value_heads": 2, "head_dim": 10, "intermediate_size": 29, "vocab_size": 37,
  "rms_norm_eps": 1e-05, "max_position_embeddings": 131072, "hidden_act": "silu",
  "tie_word_embeddings": true, "attention_bias": true, "mlp_bias": false,
  "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0,
                      "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192}})";

// transformers 4 (Qwen2-like): rope_theta at the top, rope_scaling with "type".
constexpr char kQwen2V4[] = R"({
  "model_type": "qwen2", "torch_dtype": "float32", "hidden_size": 24,
  "num_hidden_layers": 3, "num_attention_heads": 6, "num_key_value_heads": 3,
  "intermediate_size": 29, "vocab_size": 37, "max_position_embeddings": 40,
  "rope_theta": 1000000.0, "rope_scaling": {"type": "llama3", "factor": 8.0,
  "low_freq_factor": 2.0, "high_freq_factor": 5.0, "original_max_position_embeddings": 16},
  "use_sliding_window": false, "sliding_window": 4})";

// The smallest config: every optional key absent.
Json Minimal(const char* type = "llama") {
  return {{"model_type", type},       {"hidden_size", 24},       {"num_hidden_layers", 3},
          {"num_attention_heads", 6}, {"intermediate_size", 29}, {"vocab_size", 37}};
}

TEST(HfModelConfigTest, TransformersFiveKeys) {
  absl::StatusOr<ModelConfig> c = ParseHfModelConfig(kLlamaV5, 0);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->is_llama());
  EXPECT_EQ(c->vocab, 37);
  EXPECT_EQ(c->n_layer, 3);
  EXPECT_EQ(c->n_embd, 24);
  EXPECT_EQ(c->n_head, 6);
  EXPECT_EQ(c->n_kv_head, 2);
  EXPECT_EQ(c->head_dim, 10);
  EXPECT_EQ(c->n_inner, 29);
  EXPECT_EQ(c->norm_eps, 1e-5);
  EXPECT_EQ(c->max_positions, 131072);
  EXPECT_EQ(c->n_ctx, 1024);  // min(max_position_embeddings, kDefaultHfContext).
  EXPECT_EQ(c->rope_theta, 500000.0);
  EXPECT_EQ(c->rope_scaling.type, "llama3");
  EXPECT_EQ(c->rope_scaling.factor, 32.0);
  EXPECT_EQ(c->rope_scaling.low_freq_factor, 1.0);
  EXPECT_EQ(c->rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c->rope_scaling.original_max_positions, 8192);
  EXPECT_TRUE(c->tied);
  EXPECT_TRUE(c->qkv_bias && c->o_bias);  // Llama's attention_bias: q, k, v and o.
  EXPECT_FALSE(c->qk_norm);
  EXPECT_EQ(c->hf_config_json, kLlamaV5);  // Kept for export.
}

TEST(HfModelConfigTest, TransformersFourKeysAndQwen2Biases) {
  absl::StatusOr<ModelConfig> c = ParseHfModelConfig(kQwen2V4, 0);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->n_ctx, 40);    // max_position_embeddings below 1024.
  EXPECT_EQ(c->head_dim, 4);  // hidden_size / heads.
  EXPECT_EQ(c->rope_theta, 1e6);
  EXPECT_EQ(c->rope_scaling.type, "llama3");
  EXPECT_EQ(c->rope_scaling.factor, 8.0);
  EXPECT_EQ(c->rope_scaling.low_freq_factor, 2.0);
  EXPECT_EQ(c->rope_scaling.high_freq_factor, 5.0);
  EXPECT_EQ(c->rope_scaling.original_max_positions, 16);
  EXPECT_TRUE(c->qkv_bias);  // Qwen2: q/k/v biases, none on o_proj.
  EXPECT_FALSE(c->o_bias);
  EXPECT_FALSE(c->qk_norm);
  EXPECT_FALSE(c->tied);  // tie_word_embeddings absent.
  // And sliding_window 4 < n_ctx 40 was accepted: use_sliding_window false.
}

TEST(HfModelConfigTest, DefaultsAndExplicitContext) {
  absl::StatusOr<ModelConfig> c = ParseHfModelConfig(Minimal().dump(), 0);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->n_kv_head, 6);  // num_key_value_heads: the heads.
  EXPECT_EQ(c->head_dim, 4);
  EXPECT_FALSE(c->tied);
  EXPECT_FALSE(c->qkv_bias || c->o_bias || c->qk_norm);
  EXPECT_EQ(c->rope_theta, 10000.0);
  EXPECT_EQ(c->rope_scaling.type, "default");
  EXPECT_EQ(c->norm_eps, 1e-6);
  EXPECT_EQ(c->n_ctx, std::min(c->max_positions, kDefaultHfContext));
  c = ParseHfModelConfig(Minimal().dump(), 17);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->n_ctx, 17);
  // Longer than max_position_embeddings: refused.
  Json j = Minimal();
  j["max_position_embeddings"] = 16;
  absl::Status s = ParseHfModelConfig(j.dump(), 17).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("max_position_embeddings"), std::string::npos) << s;
}

TEST(HfModelConfigTest, Qwen3HasQkNormAndOptionalBiases) {
  Json j = Minimal("qwen3");
  // transformers' Qwen3Config defaults head_dim to 128 (checked with
  // transformers 5.25), not hidden_size / heads.
  j.erase("head_dim");
  absl::StatusOr<ModelConfig> d = ParseHfModelConfig(j.dump(), 0);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->head_dim, 128);
  j["head_dim"] = 10;
  absl::StatusOr<ModelConfig> c = ParseHfModelConfig(j.dump(), 0);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FALSE(c->qkv_bias || c->o_bias);
  EXPECT_EQ(c->head_dim, 10);
  j["attention_bias"] = true;
  c = ParseHfModelConfig(j.dump(), 0);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->qkv_bias && c->o_bias && c->qk_norm);
}

// Each refusal: INVALID_ARGUMENT whose message names `key`.
void ExpectRefused(const Json& j, int n_ctx, const std::string& key) {
  absl::Status s = ParseHfModelConfig(j.dump(), n_ctx).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << key << ": " << s;
  EXPECT_NE(s.message().find(key), std::string::npos) << key << ": " << s;
}

TEST(HfModelConfigTest, UnsupportedFeaturesAreRefusedByKey) {
  Json j = Minimal();
  j["model_type"] = "gemma";
  ExpectRefused(j, 0, "model_type");
  j = Minimal();
  j["hidden_act"] = "gelu";
  ExpectRefused(j, 0, "hidden_act");
  j = Minimal();
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  ExpectRefused(j, 0, "rope_scaling");
  j = Minimal();
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 1e4}};
  ExpectRefused(j, 0, "rope_parameters");
  j = Minimal();
  j["mlp_bias"] = true;
  ExpectRefused(j, 0, "mlp_bias");
  j = Minimal();
  j["layer_types"] = {"full_attention", "sliding_attention", "full_attention"};
  ExpectRefused(j, 0, "layer_types");
}

// A window shorter than the context changes attention; one at least as
// long (W >= T: every key j > i - W is visible) is full attention.
TEST(HfModelConfigTest, SlidingWindowOnlyWhereItMasksNothing) {
  Json j = Minimal("mistral");
  j["sliding_window"] = 15;
  ExpectRefused(j, 16, "sliding_window");
  j["sliding_window"] = 16;
  EXPECT_TRUE(ParseHfModelConfig(j.dump(), 16).ok());
  j["sliding_window"] = 4096;
  EXPECT_TRUE(ParseHfModelConfig(j.dump(), 0).ok());
  j["sliding_window"] = nullptr;  // Mistral v0.2+: no window.
  EXPECT_TRUE(ParseHfModelConfig(j.dump(), 0).ok());
  j = Minimal("qwen2");
  j["sliding_window"] = 4;
  j["use_sliding_window"] = true;
  ExpectRefused(j, 16, "sliding_window");
  j["use_sliding_window"] = false;
  EXPECT_TRUE(ParseHfModelConfig(j.dump(), 16).ok());
}

TEST(HfModelConfigTest, MissingOrNonIntegerSizesAreRefusedByKey) {
  Json j = Minimal();
  j.erase("hidden_size");
  ExpectRefused(j, 0, "hidden_size");
  for (const Json& bad : {Json(37.5), Json("37"), Json(0), Json(-1)}) {
    j = Minimal();
    j["vocab_size"] = bad;
    ExpectRefused(j, 0, "vocab_size");
  }
  // Keys of the wrong type are refused, never thrown.
  j = Minimal();
  j["hidden_act"] = 5;
  ExpectRefused(j, 0, "hidden_act");
  j = Minimal();
  j["model_type"] = 3;
  ExpectRefused(j, 0, "model_type");
  EXPECT_EQ(ParseHfModelConfig("[1, 2]", 0).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zeroshard
