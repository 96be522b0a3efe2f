#include "common/model/model_config.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace zeroshard {
namespace {

struct Preset {
  const char* name;
  int vocab, n_layer, n_embd, n_head, n_ctx;
};

// "small" is sized to train well below ln(256) in a few minutes with four
// worker processes on a 2-core CPU (figures in bench/model/).
constexpr Preset kPresets[] = {
    {"tiny", 256, 2, 32, 2, 16},
    {"small", 256, 4, 128, 4, 64},
    {"medium", 256, 8, 256, 8, 128},
    // GPT-2 small and medium's shapes (Radford et al., 2019, table 2) at the
    // byte vocabulary: 86.0M and 303.6M parameters here (124M and 355M at
    // vocab 50257); sized for a GPU.
    {"gpt2", 256, 12, 768, 12, 1024},
    {"gpt2-medium", 256, 24, 1024, 16, 1024},
    // GPT-2 XL's shape (1.5B parameters at vocab 50257; ~1.5B here too): far
    // beyond a CPU, kept so sizing and the memory check meet a real model.
    {"gpt2-xl", 256, 48, 1600, 25, 1024},
};

TensorSpec Tensor(std::string name, std::vector<int64_t> shape) {
  return TensorSpec{std::move(name), std::move(shape), DType::kFp32};
}

absl::Status Positive(const char* field, int64_t v) {
  if (v >= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("model config: ", field, " must be >= 1, got ", v));
}

absl::Status ValidateLlama(const ModelConfig& c) {
  ZS_RETURN_IF_ERROR(Positive("n_kv_head", c.kv_heads()));
  ZS_RETURN_IF_ERROR(Positive("head_dim", c.head_size()));
  ZS_RETURN_IF_ERROR(Positive("n_inner", c.n_inner));
  if (c.n_head % c.kv_heads() != 0) {
    return absl::InvalidArgumentError(absl::StrCat("model config: n_head (", c.n_head,
                                                   ") must be a multiple of n_kv_head (",
                                                   c.kv_heads(), ")"));
  }
  if (c.head_size() % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model config: head_dim (", c.head_size(), ") must be even (rotary pairs)"));
  }
  if (!(c.norm_eps > 0) || !(c.rope_theta > 0)) {
    return absl::InvalidArgumentError("model config: norm_eps and rope_theta must be > 0");
  }
  const RopeScaling& r = c.rope_scaling;
  if (r.type != "default" && r.type != "llama3") {
    return absl::InvalidArgumentError(
        absl::StrCat("model config: rope type '", r.type, "' is not supported (default, llama3)"));
  }
  if (r.type == "llama3" &&
      !(r.factor > 0 && r.low_freq_factor > 0 && r.high_freq_factor > r.low_freq_factor &&
        r.original_max_positions > 0)) {
    return absl::InvalidArgumentError(
        "model config: llama3 rope scaling needs factor > 0, 0 < low_freq_factor < "
        "high_freq_factor and original_max_position_embeddings > 0");
  }
  return absl::OkStatus();
}

std::vector<UnitSpec> Gpt2Units(const ModelConfig& c) {
  const int64_t C = c.n_embd;
  std::vector<UnitSpec> units;
  units.push_back(UnitSpec{"embed",
                           {Tensor("wte", {c.vocab, C}), Tensor("wpe", {c.n_ctx, C}),
                            Tensor("ln_f.weight", {C}), Tensor("ln_f.bias", {C})}});
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string p = absl::StrCat("block.", i, ".");
    units.push_back(
        UnitSpec{absl::StrCat("block.", i),
                 {Tensor(p + "ln_1.weight", {C}), Tensor(p + "ln_1.bias", {C}),
                  Tensor(p + "attn.qkv.weight", {3 * C, C}), Tensor(p + "attn.qkv.bias", {3 * C}),
                  Tensor(p + "attn.proj.weight", {C, C}), Tensor(p + "attn.proj.bias", {C}),
                  Tensor(p + "ln_2.weight", {C}), Tensor(p + "ln_2.bias", {C}),
                  Tensor(p + "mlp.fc.weight", {4 * C, C}), Tensor(p + "mlp.fc.bias", {4 * C}),
                  Tensor(p + "mlp.proj.weight", {C, 4 * C}), Tensor(p + "mlp.proj.bias", {C})}});
  }
  return units;
}

UnitSpec LlamaBlock(const ModelConfig& c, int i) {
  const int64_t C = c.n_embd, D = c.head_size(), Q = int64_t{c.n_head} * D,
                K = int64_t{c.kv_heads()} * D, I = c.n_inner;
  const std::string p = absl::StrCat("model.layers.", i, ".");
  const std::string a = p + "self_attn.";
  UnitSpec u{absl::StrCat("layers.", i), {Tensor(p + "input_layernorm.weight", {C})}};
  u.params.push_back(Tensor(a + "q_proj.weight", {Q, C}));
  u.params.push_back(Tensor(a + "k_proj.weight", {K, C}));
  u.params.push_back(Tensor(a + "v_proj.weight", {K, C}));
  if (c.qkv_bias) {
    u.params.push_back(Tensor(a + "q_proj.bias", {Q}));
    u.params.push_back(Tensor(a + "k_proj.bias", {K}));
    u.params.push_back(Tensor(a + "v_proj.bias", {K}));
  }
  if (c.qk_norm) {
    u.params.push_back(Tensor(a + "q_norm.weight", {D}));
    u.params.push_back(Tensor(a + "k_norm.weight", {D}));
  }
  u.params.push_back(Tensor(a + "o_proj.weight", {C, Q}));
  if (c.o_bias) u.params.push_back(Tensor(a + "o_proj.bias", {C}));
  u.params.push_back(Tensor(p + "post_attention_layernorm.weight", {C}));
  // gate then up, adjacent: the model runs them as one [2I, C] matmul.
  u.params.push_back(Tensor(p + "mlp.gate_proj.weight", {I, C}));
  u.params.push_back(Tensor(p + "mlp.up_proj.weight", {I, C}));
  u.params.push_back(Tensor(p + "mlp.down_proj.weight", {C, I}));
  return u;
}

std::vector<UnitSpec> LlamaUnits(const ModelConfig& c) {
  std::vector<UnitSpec> units;
  units.push_back(UnitSpec{"embed", {Tensor("model.embed_tokens.weight", {c.vocab, c.n_embd})}});
  if (c.tied) units[0].params.push_back(Tensor("model.norm.weight", {c.n_embd}));
  for (int i = 0; i < c.n_layer; ++i) units.push_back(LlamaBlock(c, i));
  if (!c.tied) {
    units.push_back(UnitSpec{
        "head",
        {Tensor("model.norm.weight", {c.n_embd}), Tensor("lm_head.weight", {c.vocab, c.n_embd})}});
  }
  return units;
}

}  // namespace

absl::Status ValidateModelConfig(const ModelConfig& c) {
  ZS_RETURN_IF_ERROR(Positive("vocab", c.vocab));
  ZS_RETURN_IF_ERROR(Positive("n_layer", c.n_layer));
  ZS_RETURN_IF_ERROR(Positive("n_embd", c.n_embd));
  ZS_RETURN_IF_ERROR(Positive("n_head", c.n_head));
  ZS_RETURN_IF_ERROR(Positive("n_ctx", c.n_ctx));
  if (c.is_llama()) return ValidateLlama(c);
  if (c.n_embd % c.n_head != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model config: n_embd (", c.n_embd, ") must be a multiple of n_head (", c.n_head, ")"));
  }
  return absl::OkStatus();
}

ModelConfig Gpt2Config(int vocab, int n_layer, int n_embd, int n_head, int n_ctx) {
  ModelConfig c;
  c.vocab = vocab;
  c.n_layer = n_layer;
  c.n_embd = n_embd;
  c.n_head = n_head;
  c.n_ctx = n_ctx;
  return c;
}

std::vector<std::string> ModelPresetNames() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.push_back(p.name);
  return names;
}

std::string ModelPresetFlagHelp() {
  return absl::StrCat("model preset (", absl::StrJoin(ModelPresetNames(), ", "),
                      ") or a Hugging Face model directory (config.json + safetensors)");
}

absl::StatusOr<ModelConfig> ModelPreset(const std::string& name) {
  for (const Preset& p : kPresets) {
    if (name == p.name) return Gpt2Config(p.vocab, p.n_layer, p.n_embd, p.n_head, p.n_ctx);
  }
  return absl::NotFoundError(absl::StrCat("unknown model '", name,
                                          "' (known: ", absl::StrJoin(ModelPresetNames(), ", "),
                                          ", or a model directory)"));
}

std::vector<UnitSpec> ModelUnits(const ModelConfig& c) {
  return c.is_llama() ? LlamaUnits(c) : Gpt2Units(c);
}

int64_t ModelParamCount(const ModelConfig& c) {
  int64_t n = 0;
  for (const UnitSpec& u : ModelUnits(c)) {
    for (const TensorSpec& t : u.params) {
      int64_t e = 1;
      for (int64_t d : t.shape) e *= d;
      n += e;
    }
  }
  return n;
}

int64_t ModelParamBytes(const ModelConfig& c) { return 4 * ModelParamCount(c); }

std::string ModelConfigToJson(const ModelConfig& c) {
  const RopeScaling& r = c.rope_scaling;
  nlohmann::json j = {{"family", c.is_llama() ? "llama" : "gpt2"},
                      {"vocab", c.vocab},
                      {"n_layer", c.n_layer},
                      {"n_embd", c.n_embd},
                      {"n_head", c.n_head},
                      {"n_ctx", c.n_ctx},
                      {"n_kv_head", c.n_kv_head},
                      {"head_dim", c.head_dim},
                      {"n_inner", c.n_inner},
                      {"norm_eps", c.norm_eps},
                      {"rope_theta", c.rope_theta},
                      {"rope_scaling",
                       {{"type", r.type},
                        {"factor", r.factor},
                        {"low_freq_factor", r.low_freq_factor},
                        {"high_freq_factor", r.high_freq_factor},
                        {"original_max_positions", r.original_max_positions}}},
                      {"qkv_bias", c.qkv_bias},
                      {"o_bias", c.o_bias},
                      {"qk_norm", c.qk_norm},
                      {"tied", c.tied},
                      {"max_positions", c.max_positions},
                      {"hf_config_json", c.hf_config_json}};
  return j.dump();
}

absl::StatusOr<ModelConfig> ModelConfigFromJson(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("model config: not a JSON object");
  }
  ModelConfig c;
  // The key being read, for the error: json's type errors do not name it.
  std::string field = "family";
  auto get = [&field, &j](const nlohmann::json& from, const char* key, auto fallback) {
    field = absl::StrCat(&from == &j ? "" : "rope_scaling.", key);
    return from.value(key, fallback);
  };
  try {
    const std::string family = j.at("family").get<std::string>();
    if (family != "gpt2" && family != "llama") {
      return absl::InvalidArgumentError(
          absl::StrCat("model config: family '", family, "' is not gpt2 or llama"));
    }
    c.family = family == "llama" ? ModelFamily::kLlama : ModelFamily::kGpt2;
    for (auto [key, value] : {std::pair{"vocab", &c.vocab},
                              {"n_layer", &c.n_layer},
                              {"n_embd", &c.n_embd},
                              {"n_head", &c.n_head},
                              {"n_ctx", &c.n_ctx},
                              {"n_kv_head", &c.n_kv_head},
                              {"head_dim", &c.head_dim},
                              {"n_inner", &c.n_inner},
                              {"max_positions", &c.max_positions}}) {
      *value = get(j, key, *value);
    }
    c.norm_eps = get(j, "norm_eps", c.norm_eps);
    c.rope_theta = get(j, "rope_theta", c.rope_theta);
    c.qkv_bias = get(j, "qkv_bias", c.qkv_bias);
    c.o_bias = get(j, "o_bias", c.o_bias);
    c.qk_norm = get(j, "qk_norm", c.qk_norm);
    c.tied = get(j, "tied", c.tied);
    c.hf_config_json = get(j, "hf_config_json", std::string());
    if (j.contains("rope_scaling")) {
      const nlohmann::json& r = j.at("rope_scaling");
      RopeScaling& s = c.rope_scaling;
      s.type = get(r, "type", s.type);
      s.factor = get(r, "factor", s.factor);
      s.low_freq_factor = get(r, "low_freq_factor", s.low_freq_factor);
      s.high_freq_factor = get(r, "high_freq_factor", s.high_freq_factor);
      s.original_max_positions = get(r, "original_max_positions", s.original_max_positions);
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("model config: ", field, ": ", e.what()));
  }
  ZS_RETURN_IF_ERROR(ValidateModelConfig(c));
  return c;
}

absl::StatusOr<ActivationCheckpointing> ParseActivationCheckpointing(const std::string& text) {
  if (auto v = FromWord(kActivationCheckpointingWords, text)) return *v;
  return absl::InvalidArgumentError(
      absl::StrCat("--activation-checkpointing: unknown value '", text, "' (none|blocks)"));
}

const char* ActivationCheckpointingName(ActivationCheckpointing mode) {
  return WordOf(kActivationCheckpointingWords, mode).data();  // Literals: NUL-terminated.
}

}  // namespace zeroshard
