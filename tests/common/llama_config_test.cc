// ModelConfig's llama family as data: the JSON the coordinator serves
// workers carries every field exactly (a worker built from a lossy copy
// would train another model), and a llama config's units are HF's tensor
// names and shapes in the layout model_config.h documents, counted by hand.
#include <string>
#include <vector>

#include "common/model/model_config.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

// Every field away from its default; doubles that are not short decimals.
ModelConfig EveryFieldSet() {
  ModelConfig c;
  c.family = ModelFamily::kLlama;
  c.vocab = 37;
  c.n_layer = 3;
  c.n_embd = 24;
  c.n_head = 6;
  c.n_ctx = 11;
  c.n_kv_head = 2;
  c.head_dim = 10;
  c.n_inner = 29;
  c.norm_eps = 1.0 / 3e5;
  c.rope_theta = 123456.789012345;
  c.rope_scaling = {.type = "llama3",
                    .factor = 3.5,
                    .low_freq_factor = 0.1,
                    .high_freq_factor = 6.25,
                    .original_max_positions = 77};
  c.qkv_bias = c.o_bias = c.qk_norm = true;
  c.tied = false;
  c.max_positions = 4099;
  c.hf_config_json = "{\"model_type\": \"qwen3\",\n \"note\": \"quote \\\" \\u00e9\"}";
  return c;
}

TEST(LlamaConfigTest, JsonRoundTripKeepsEveryField) {
  const ModelConfig a = EveryFieldSet();
  absl::StatusOr<ModelConfig> b = ModelConfigFromJson(ModelConfigToJson(a));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(b->is_llama());
  EXPECT_EQ(b->vocab, a.vocab);
  EXPECT_EQ(b->n_layer, a.n_layer);
  EXPECT_EQ(b->n_embd, a.n_embd);
  EXPECT_EQ(b->n_head, a.n_head);
  EXPECT_EQ(b->n_ctx, a.n_ctx);
  EXPECT_EQ(b->n_kv_head, a.n_kv_head);
  EXPECT_EQ(b->head_dim, a.head_dim);
  EXPECT_EQ(b->n_inner, a.n_inner);
  EXPECT_EQ(b->norm_eps, a.norm_eps);  // Exact: the JSON keeps 17 digits.
  EXPECT_EQ(b->rope_theta, a.rope_theta);
  EXPECT_EQ(b->rope_scaling.type, a.rope_scaling.type);
  EXPECT_EQ(b->rope_scaling.factor, a.rope_scaling.factor);
  EXPECT_EQ(b->rope_scaling.low_freq_factor, a.rope_scaling.low_freq_factor);
  EXPECT_EQ(b->rope_scaling.high_freq_factor, a.rope_scaling.high_freq_factor);
  EXPECT_EQ(b->rope_scaling.original_max_positions, a.rope_scaling.original_max_positions);
  EXPECT_EQ(b->qkv_bias, a.qkv_bias);
  EXPECT_EQ(b->o_bias, a.o_bias);
  EXPECT_EQ(b->qk_norm, a.qk_norm);
  EXPECT_EQ(b->tied, a.tied);
  EXPECT_EQ(b->max_positions, a.max_positions);
  EXPECT_EQ(b->hf_config_json, a.hf_config_json);
  // A gpt2 preset comes back a gpt2 model.
  absl::StatusOr<ModelConfig> tiny = ModelConfigFromJson(ModelConfigToJson(*ModelPreset("tiny")));
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  EXPECT_FALSE(tiny->is_llama());
  EXPECT_EQ(ModelParamCount(*tiny), ModelParamCount(*ModelPreset("tiny")));
}

TEST(LlamaConfigTest, JsonErrorsNameTheField) {
  for (auto [text, field] :
       {std::pair{R"({"family": "bert"})", "family"},
        {R"({"family": "llama", "vocab": "x"})", "vocab"},
        {R"({"family": "llama", "rope_scaling": {"factor": "x"}})", "rope_scaling.factor"},
        {R"({"family": "llama", "vocab": 37, "n_layer": 1, "n_embd": 24,
                                  "n_head": 5, "n_kv_head": 2, "n_inner": 8, "n_ctx": 4,
                                  "head_dim": 4})",
         "n_head"}}) {
    absl::Status s = ModelConfigFromJson(text).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_NE(s.message().find(field), std::string::npos) << s;
  }
}

using Shape = std::vector<int64_t>;

TEST(LlamaConfigTest, UnitsAreHfTensorsInTheDocumentedLayout) {
  const ModelConfig c = EveryFieldSet();  // C 24, NH 6 x D 10 = 60, KV 2 x 10 = 20, I 29.
  const std::vector<UnitSpec> units = ModelUnits(c);
  ASSERT_EQ(units.size(), 5u);  // embed, 3 layers, head (untied).
  EXPECT_EQ(c.head_unit(), 4);
  ASSERT_EQ(units[0].params.size(), 1u);
  EXPECT_EQ(units[0].params[0].name, "model.embed_tokens.weight");
  EXPECT_EQ(units[0].params[0].shape, Shape({37, 24}));
  const std::vector<std::pair<std::string, Shape>> layer = {
      {"input_layernorm.weight", {24}},      {"self_attn.q_proj.weight", {60, 24}},
      {"self_attn.k_proj.weight", {20, 24}}, {"self_attn.v_proj.weight", {20, 24}},
      {"self_attn.q_proj.bias", {60}},       {"self_attn.k_proj.bias", {20}},
      {"self_attn.v_proj.bias", {20}},       {"self_attn.q_norm.weight", {10}},
      {"self_attn.k_norm.weight", {10}},     {"self_attn.o_proj.weight", {24, 60}},
      {"self_attn.o_proj.bias", {24}},       {"post_attention_layernorm.weight", {24}},
      {"mlp.gate_proj.weight", {29, 24}},    {"mlp.up_proj.weight", {29, 24}},
      {"mlp.down_proj.weight", {24, 29}}};
  EXPECT_EQ(units[2].name, "layers.1");
  ASSERT_EQ(units[2].params.size(), layer.size());
  for (size_t i = 0; i < layer.size(); ++i) {
    EXPECT_EQ(units[2].params[i].name, "model.layers.1." + layer[i].first);
    EXPECT_EQ(units[2].params[i].shape, layer[i].second) << layer[i].first;
  }
  EXPECT_EQ(units[4].name, "head");
  ASSERT_EQ(units[4].params.size(), 2u);
  EXPECT_EQ(units[4].params[0].name, "model.norm.weight");
  EXPECT_EQ(units[4].params[1].name, "lm_head.weight");
  EXPECT_EQ(units[4].params[1].shape, Shape({37, 24}));
  // By hand: per layer 24 + 60*24 + 2*20*24 + (60 + 2*20) + 2*10 + 24*60 + 24
  // + 24 + 2*29*24 + 24*29 = 6120; embed 37*24; head 24 + 37*24.
  EXPECT_EQ(ModelParamCount(c), 3 * 6120 + 888 + 24 + 888);
}

// Tied: no head unit; the final norm joins the embedding, counted once.
TEST(LlamaConfigTest, TiedModelHasNoHeadUnit) {
  ModelConfig c = EveryFieldSet();
  c.tied = true;
  c.qkv_bias = c.o_bias = c.qk_norm = false;
  const std::vector<UnitSpec> units = ModelUnits(c);
  ASSERT_EQ(units.size(), 4u);
  EXPECT_EQ(c.head_unit(), 0);
  ASSERT_EQ(units[0].params.size(), 2u);
  EXPECT_EQ(units[0].params[1].name, "model.norm.weight");
  EXPECT_EQ(units[3].params.size(), 9u);  // No biases, no QK-norm.
  EXPECT_EQ(ModelParamCount(c), 3 * (6120 - 100 - 20 - 24) + 888 + 24);
}

}  // namespace
}  // namespace zeroshard
