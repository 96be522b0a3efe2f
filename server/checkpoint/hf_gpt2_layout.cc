#include "server/checkpoint/hf_gpt2_layout.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace zeroshard::server {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

}  // namespace

std::vector<HfTensor> HfGpt2Tensors(const ModelConfig& c) {
  const int64_t C = c.n_embd;
  std::vector<HfTensor> out;
  auto same = [&out](std::string hf, std::string zs, std::vector<int64_t> shape) {
    out.push_back({std::move(hf), std::move(zs), std::move(shape), false});
  };
  // Linear [out, in] -> Conv1D [in, out].
  auto conv1d = [&out](std::string hf, std::string zs, int64_t in, int64_t outs) {
    out.push_back({std::move(hf), std::move(zs), {in, outs}, true});
  };
  same("transformer.wte.weight", "wte", {c.vocab, C});
  same("transformer.wpe.weight", "wpe", {c.n_ctx, C});
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string h = absl::StrCat("transformer.h.", i, ".");
    const std::string b = absl::StrCat("block.", i, ".");
    same(h + "ln_1.weight", b + "ln_1.weight", {C});
    same(h + "ln_1.bias", b + "ln_1.bias", {C});
    conv1d(h + "attn.c_attn.weight", b + "attn.qkv.weight", C, 3 * C);
    same(h + "attn.c_attn.bias", b + "attn.qkv.bias", {3 * C});
    conv1d(h + "attn.c_proj.weight", b + "attn.proj.weight", C, C);
    same(h + "attn.c_proj.bias", b + "attn.proj.bias", {C});
    same(h + "ln_2.weight", b + "ln_2.weight", {C});
    same(h + "ln_2.bias", b + "ln_2.bias", {C});
    conv1d(h + "mlp.c_fc.weight", b + "mlp.fc.weight", C, 4 * C);
    same(h + "mlp.c_fc.bias", b + "mlp.fc.bias", {4 * C});
    conv1d(h + "mlp.c_proj.weight", b + "mlp.proj.weight", 4 * C, C);
    same(h + "mlp.c_proj.bias", b + "mlp.proj.bias", {C});
  }
  same("transformer.ln_f.weight", "ln_f.weight", {C});
  same("transformer.ln_f.bias", "ln_f.bias", {C});
  return out;
}

std::string HfGpt2ConfigJson(const ModelConfig& c) {
  const nlohmann::json j = {
      {"architectures", {"GPT2LMHeadModel"}},
      {"model_type", "gpt2"},
      {"vocab_size", c.vocab},
      {"n_positions", c.n_ctx},
      {"n_ctx", c.n_ctx},
      {"n_embd", c.n_embd},
      {"n_layer", c.n_layer},
      {"n_head", c.n_head},
      {"n_inner", nullptr},  // 4 * n_embd, as zeroshard's MLP.
      {"activation_function", "gelu_new"},
      {"layer_norm_epsilon", 1e-5},
      {"resid_pdrop", 0.0},
      {"embd_pdrop", 0.0},
      {"attn_pdrop", 0.0},
      {"scale_attn_weights", true},
      {"scale_attn_by_inverse_layer_idx", false},
      {"reorder_and_upcast_attn", false},
      {"tie_word_embeddings", true},
      {"bos_token_id", nullptr},  // Byte vocabulary: no special tokens.
      {"eos_token_id", nullptr},
      {"dtype", "float32"},  // transformers 5 reads "dtype" (4.x: "torch_dtype").
  };
  return j.dump(2) + "\n";
}

absl::StatusOr<ModelConfig> ModelConfigOfJob(const std::string& job_config_json) {
  const nlohmann::json j =
      nlohmann::json::parse(job_config_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::FailedPreconditionError(
        "the checkpoint's model config is not a JSON object, so its model is unknown");
  }
  auto desc = j.find("model_desc");
  if (desc != j.end() && desc->is_string() && !desc->get<std::string>().empty()) {
    absl::StatusOr<ModelConfig> model = ModelConfigFromJson(desc->get<std::string>());
    if (!model.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the checkpoint's model description: ", model.status().message()));
    }
    return model;
  }
  auto it = j.find("model");
  if (it == j.end() || !it->is_string()) {
    return absl::FailedPreconditionError(
        "the checkpoint's model config names no model preset (no \"model\" field)");
  }
  return ModelPreset(it->get<std::string>());
}

absl::Status CheckPlanIsModel(const ShardPlan& plan, const ModelConfig& config) {
  const std::vector<UnitSpec> units = ModelUnits(config);
  if (plan.units.size() != units.size()) {
    return absl::FailedPreconditionError(absl::StrCat("the checkpoint has ", plan.units.size(),
                                                      " units where its model preset has ",
                                                      units.size()));
  }
  for (size_t u = 0; u < units.size(); ++u) {
    const UnitPlan& got = plan.units[u];
    const UnitSpec& want = units[u];
    if (got.name != want.name || got.params.size() != want.params.size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint unit ", u, " (", got.name, ", ", got.params.size(),
          " parameters) is not the model's ", want.name, " (", want.params.size(), ")"));
    }
    for (size_t p = 0; p < want.params.size(); ++p) {
      const ParamPlacement& g = got.params[p];
      const TensorSpec& w = want.params[p];
      if (g.name != w.name || g.shape != w.shape || g.dtype != w.dtype) {
        return absl::FailedPreconditionError(
            absl::StrCat("checkpoint parameter ", g.name, " ", ShapeText(g.shape),
                         " is not the model's ", w.name, " ", ShapeText(w.shape), " fp32"));
      }
    }
  }
  return absl::OkStatus();
}

void TransposeInto(const float* src, int64_t rows, int64_t cols, float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * cols + c];
  }
}

}  // namespace zeroshard::server
