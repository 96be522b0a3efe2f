#include "worker/model/model_config.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "worker/data/splitmix64.h"

namespace zeroshard {
namespace {

struct Preset {
  const char* name;
  ModelConfig config;
};

// "small" is sized to train well below ln(256) in a few minutes with four
// worker processes on a 2-core CPU (figures in bench/model/).
constexpr Preset kPresets[] = {
    {"tiny", {256, 2, 32, 2, 16}},
    {"small", {256, 4, 128, 4, 64}},
    {"medium", {256, 8, 256, 8, 128}},
    // GPT-2 small and medium's shapes (Radford et al., 2019, table 2) at the
    // byte vocabulary: 86.0M and 303.6M parameters here (124M and 355M at
    // vocab 50257); sized for a GPU.
    {"gpt2", {256, 12, 768, 12, 1024}},
    {"gpt2-medium", {256, 24, 1024, 16, 1024}},
    // GPT-2 XL's shape (1.5B parameters at vocab 50257; ~1.5B here too): far
    // beyond a CPU, kept so sizing and the memory check meet a real model.
    {"gpt2-xl", {256, 48, 1600, 25, 1024}},
};

TensorSpec Tensor(std::string name, std::vector<int64_t> shape) {
  return TensorSpec{std::move(name), std::move(shape), DType::kFp32};
}

}  // namespace

absl::Status ValidateModelConfig(const ModelConfig& c) {
  auto positive = [](const char* field, int v) -> absl::Status {
    if (v < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("model config: ", field, " must be >= 1, got ", v));
    }
    return absl::OkStatus();
  };
  ZS_RETURN_IF_ERROR(positive("vocab", c.vocab));
  ZS_RETURN_IF_ERROR(positive("n_layer", c.n_layer));
  ZS_RETURN_IF_ERROR(positive("n_embd", c.n_embd));
  ZS_RETURN_IF_ERROR(positive("n_head", c.n_head));
  ZS_RETURN_IF_ERROR(positive("n_ctx", c.n_ctx));
  if (c.n_embd % c.n_head != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model config: n_embd (", c.n_embd, ") must be a multiple of n_head (",
        c.n_head, ")"));
  }
  return absl::OkStatus();
}

std::vector<std::string> ModelPresetNames() {
  std::vector<std::string> names;
  for (const Preset& p : kPresets) names.push_back(p.name);
  return names;
}

std::string ModelPresetFlagHelp() {
  return absl::StrCat("model preset (", absl::StrJoin(ModelPresetNames(), ", "), ")");
}

absl::StatusOr<ModelConfig> ModelPreset(const std::string& name) {
  for (const Preset& p : kPresets) {
    if (name == p.name) return p.config;
  }
  return absl::NotFoundError(absl::StrCat("unknown model '", name, "' (known: ",
                                          absl::StrJoin(ModelPresetNames(), ", "),
                                          ")"));
}

std::vector<UnitSpec> ModelUnits(const ModelConfig& c) {
  const int64_t C = c.n_embd;
  std::vector<UnitSpec> units;
  units.push_back(UnitSpec{"embed",
                           {Tensor("wte", {c.vocab, C}), Tensor("wpe", {c.n_ctx, C}),
                            Tensor("ln_f.weight", {C}), Tensor("ln_f.bias", {C})}});
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string p = absl::StrCat("block.", i, ".");
    units.push_back(UnitSpec{
        absl::StrCat("block.", i),
        {Tensor(p + "ln_1.weight", {C}), Tensor(p + "ln_1.bias", {C}),
         Tensor(p + "attn.qkv.weight", {3 * C, C}), Tensor(p + "attn.qkv.bias", {3 * C}),
         Tensor(p + "attn.proj.weight", {C, C}), Tensor(p + "attn.proj.bias", {C}),
         Tensor(p + "ln_2.weight", {C}), Tensor(p + "ln_2.bias", {C}),
         Tensor(p + "mlp.fc.weight", {4 * C, C}), Tensor(p + "mlp.fc.bias", {4 * C}),
         Tensor(p + "mlp.proj.weight", {C, 4 * C}), Tensor(p + "mlp.proj.bias", {C})}});
  }
  return units;
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

std::vector<std::vector<float>> InitUnits(const ModelConfig& c, uint64_t seed) {
  const std::vector<UnitSpec> units = ModelUnits(c);
  absl::StatusOr<ShardPlan> plan = MakeShardPlan(units, 1, 1);
  ZS_CHECK(plan.ok());
  const double residual_std = 0.02 / std::sqrt(2.0 * c.n_layer);
  std::vector<std::vector<float>> out;
  for (size_t u = 0; u < plan->units.size(); ++u) {
    const UnitPlan& up = plan->units[u];
    std::vector<float> buf(up.numel, 0.0f);
    for (size_t p = 0; p < up.params.size(); ++p) {
      const ParamPlacement& pp = up.params[p];
      const std::string& n = pp.name;
      auto ends_with = [&n](const std::string& s) {
        return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
      };
      float* dst = buf.data() + pp.offset;
      if (ends_with("bias")) continue;  // Zero, including LayerNorm beta.
      if (pp.shape.size() == 1) {       // LayerNorm gamma.
        for (int64_t i = 0; i < pp.numel; ++i) dst[i] = 1.0f;
        continue;
      }
      const double stddev =
          (ends_with("attn.proj.weight") || ends_with("mlp.proj.weight")) ? residual_std
                                                                          : 0.02;
      // Box-Muller over a counter-based stream: element i depends only on
      // (seed, unit, parameter, i), so init never depends on call order.
      for (int64_t i = 0; i < pp.numel; i += 2) {
        const uint64_t h = HashWords({seed, u, p, static_cast<uint64_t>(i)});
        const double u1 = 1.0 - UnitInterval(h);  // (0, 1]
        const double u2 = UnitInterval(SplitMix64(h));
        const double r = std::sqrt(-2.0 * std::log(u1));
        dst[i] = static_cast<float>(stddev * r * std::cos(2.0 * M_PI * u2));
        if (i + 1 < pp.numel) {
          dst[i + 1] = static_cast<float>(stddev * r * std::sin(2.0 * M_PI * u2));
        }
      }
    }
    out.push_back(std::move(buf));
  }
  return out;
}

absl::StatusOr<ActivationCheckpointing> ParseActivationCheckpointing(const std::string& text) {
  if (text == "none") return ActivationCheckpointing::kNone;
  if (text == "blocks") return ActivationCheckpointing::kBlocks;
  return absl::InvalidArgumentError(
      absl::StrCat("--activation-checkpointing: unknown value '", text, "' (none|blocks)"));
}

const char* ActivationCheckpointingName(ActivationCheckpointing mode) {
  return mode == ActivationCheckpointing::kBlocks ? "blocks" : "none";
}

}  // namespace zeroshard
