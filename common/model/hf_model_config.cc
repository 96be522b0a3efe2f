#include "common/model/hf_model_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace zeroshard {
namespace {

using Json = nlohmann::json;

absl::Status Refuse(const std::string& key, const Json& value, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("config.json: ", key, " = ", value.dump(), ": ", why));
}

// A positive integer at `key`; `fallback` (if >= 0) when absent or null.
absl::StatusOr<int> Int(const Json& j, const std::string& key, int fallback = -1) {
  if (!j.contains(key) || j.at(key).is_null()) {
    if (fallback >= 0) return fallback;
    return absl::InvalidArgumentError(absl::StrCat("config.json: ", key, " is missing"));
  }
  const Json& v = j.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (int64_t{1} << 30)) {
    return Refuse(key, v, "must be a positive integer");
  }
  return v.get<int>();
}

absl::StatusOr<double> Number(const Json& j, const std::string& key, double fallback) {
  if (!j.contains(key) || j.at(key).is_null()) return fallback;
  if (!j.at(key).is_number()) return Refuse(key, j.at(key), "must be a number");
  return j.at(key).get<double>();
}

// A string at `key`; `fallback` when absent or null. (Json::value would
// throw on another type, and nothing here catches.)
absl::StatusOr<std::string> String(const Json& j, const std::string& key,
                                   const std::string& fallback) {
  if (!j.contains(key) || j.at(key).is_null()) return fallback;
  if (!j.at(key).is_string()) return Refuse(key, j.at(key), "must be a string");
  return j.at(key).get<std::string>();
}

bool Flag(const Json& j, const std::string& key, bool fallback) {
  return j.contains(key) && j.at(key).is_boolean() ? j.at(key).get<bool>() : fallback;
}

// rope_parameters (transformers 5) or rope_theta + rope_scaling (4).
absl::Status ReadRope(const Json& j, ModelConfig& c) {
  const bool v5 = j.contains("rope_parameters") && j.at("rope_parameters").is_object();
  const std::string key = v5 ? "rope_parameters" : "rope_scaling";
  const Json none = Json::object();
  const Json& r = j.contains(key) && j.at(key).is_object() ? j.at(key) : none;
  ZS_ASSIGN_OR_RETURN(c.rope_theta, Number(v5 ? r : j, "rope_theta", 10000.0));
  std::string type = "default";
  for (const char* k : {"rope_type", "type"}) {
    if (r.contains(k) && r.at(k).is_string()) type = r.at(k).get<std::string>();
  }
  if (type != "default" && type != "llama3") {
    return Refuse(key + ".rope_type", Json(type), "only default and llama3 are supported");
  }
  c.rope_scaling.type = type;
  if (type != "llama3") return absl::OkStatus();
  ZS_ASSIGN_OR_RETURN(c.rope_scaling.factor, Number(r, "factor", 8.0));
  ZS_ASSIGN_OR_RETURN(c.rope_scaling.low_freq_factor, Number(r, "low_freq_factor", 1.0));
  ZS_ASSIGN_OR_RETURN(c.rope_scaling.high_freq_factor, Number(r, "high_freq_factor", 4.0));
  ZS_ASSIGN_OR_RETURN(c.rope_scaling.original_max_positions,
                      Int(r, "original_max_position_embeddings", 8192));
  return absl::OkStatus();
}

// Sliding windows, per-layer attention kinds and MLP biases: refused
// unless they change nothing at context `n_ctx`.
absl::Status CheckAttentionKinds(const Json& j, const std::string& type, int n_ctx) {
  const bool qwen = type == "qwen2" || type == "qwen3";
  const bool window_on = qwen ? Flag(j, "use_sliding_window", false) : true;
  if (window_on && j.contains("sliding_window") && !j.at("sliding_window").is_null()) {
    const Json& w = j.at("sliding_window");
    if (!w.is_number_integer() || w.get<int64_t>() < n_ctx) {
      return Refuse("sliding_window", w,
                    absl::StrCat("sliding-window attention is not supported (a window of at "
                                 "least the training context, ",
                                 n_ctx,
                                 ", would be full "
                                 "attention)"));
    }
  }
  if (j.contains("layer_types") && j.at("layer_types").is_array()) {
    for (const Json& kind : j.at("layer_types")) {
      if (kind != "full_attention") {
        return Refuse("layer_types", kind, "only full_attention layers are supported");
      }
    }
  }
  if (Flag(j, "mlp_bias", false))
    return Refuse("mlp_bias", Json(true), "MLP biases are not supported");
  return absl::OkStatus();
}

// `qwen3`: transformers' Qwen3Config defaults head_dim to 128, not
// hidden_size / heads as the others do.
absl::Status ReadSizes(const Json& j, int n_ctx, bool qwen3, ModelConfig& c) {
  ZS_ASSIGN_OR_RETURN(c.vocab, Int(j, "vocab_size"));
  ZS_ASSIGN_OR_RETURN(c.n_embd, Int(j, "hidden_size"));
  ZS_ASSIGN_OR_RETURN(c.n_layer, Int(j, "num_hidden_layers"));
  ZS_ASSIGN_OR_RETURN(c.n_head, Int(j, "num_attention_heads"));
  ZS_ASSIGN_OR_RETURN(c.n_kv_head, Int(j, "num_key_value_heads", c.n_head));
  ZS_ASSIGN_OR_RETURN(c.head_dim, Int(j, "head_dim", qwen3 ? 128 : c.n_embd / c.n_head));
  ZS_ASSIGN_OR_RETURN(c.n_inner, Int(j, "intermediate_size"));
  ZS_ASSIGN_OR_RETURN(c.max_positions, Int(j, "max_position_embeddings", 2048));
  ZS_ASSIGN_OR_RETURN(c.norm_eps, Number(j, "rms_norm_eps", 1e-6));
  if (n_ctx > c.max_positions) {
    return Refuse("max_position_embeddings", Json(c.max_positions),
                  absl::StrCat("shorter than the training context ", n_ctx));
  }
  c.n_ctx = n_ctx > 0 ? n_ctx : std::min(c.max_positions, kDefaultHfContext);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ParseHfModelConfig(const std::string& text, int n_ctx) {
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("config.json: not a JSON object");
  }
  ZS_ASSIGN_OR_RETURN(const std::string type, String(j, "model_type", ""));
  if (type != "llama" && type != "mistral" && type != "qwen2" && type != "qwen3") {
    return Refuse("model_type", j.contains("model_type") ? j.at("model_type") : Json(nullptr),
                  "zeroshard supports llama, mistral, qwen2 and qwen3");
  }
  ZS_ASSIGN_OR_RETURN(const std::string act, String(j, "hidden_act", "silu"));
  if (act != "silu") return Refuse("hidden_act", Json(act), "only silu (SwiGLU) is supported");
  ModelConfig c;
  c.family = ModelFamily::kLlama;
  ZS_RETURN_IF_ERROR(ReadSizes(j, n_ctx, type == "qwen3", c));
  ZS_RETURN_IF_ERROR(CheckAttentionKinds(j, type, c.n_ctx));
  ZS_RETURN_IF_ERROR(ReadRope(j, c));
  c.tied = Flag(j, "tie_word_embeddings", false);
  const bool attention_bias = Flag(j, "attention_bias", false);
  c.qkv_bias = type == "qwen2" || attention_bias;
  c.o_bias = type != "qwen2" && attention_bias;
  c.qk_norm = type == "qwen3";
  c.hf_config_json = text;
  ZS_RETURN_IF_ERROR(ValidateModelConfig(c));
  return c;
}

absl::StatusOr<ModelConfig> ReadHfModelConfig(const std::string& dir, int n_ctx) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  std::stringstream text;
  text << in.rdbuf();
  return ParseHfModelConfig(text.str(), n_ctx);
}

bool IsHfModelDir(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) &&
         std::filesystem::is_regular_file(std::filesystem::path(path) / "config.json", ec);
}

}  // namespace zeroshard
