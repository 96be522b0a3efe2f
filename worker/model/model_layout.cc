#include "worker/model/model_layout.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/shard_plan.h"
#include "common/status_macros.h"

namespace zeroshard {
namespace {

ShardPlan PlanOf(const ModelConfig& config) {
  absl::StatusOr<ShardPlan> plan = MakeShardPlan(ModelUnits(config), 1, 1);
  ZS_CHECK(plan.ok());
  return *std::move(plan);
}

int64_t Required(const UnitPlan& unit, const std::string& name) {
  const int64_t o = unit.ParamOffset(name);
  ZS_CHECK(o >= 0 && "parameter missing from the model's own units");
  return o;
}

}  // namespace

GptLayout MakeGptLayout(const ModelConfig& config) {
  ZS_CHECK(!config.is_llama());
  const ShardPlan plan = PlanOf(config);
  const UnitPlan& e = plan.units[0];
  const UnitPlan& b = plan.units[1];
  auto f = [&b](const char* n) { return Required(b, absl::StrCat("block.0.", n)); };
  return {Required(e, "wte"),
          Required(e, "wpe"),
          Required(e, "ln_f.weight"),
          Required(e, "ln_f.bias"),
          {f("ln_1.weight"), f("ln_1.bias"), f("attn.qkv.weight"), f("attn.qkv.bias"),
           f("attn.proj.weight"), f("attn.proj.bias"), f("ln_2.weight"), f("ln_2.bias"),
           f("mlp.fc.weight"), f("mlp.fc.bias"), f("mlp.proj.weight"), f("mlp.proj.bias")}};
}

LlamaLayout MakeLlamaLayout(const ModelConfig& config) {
  ZS_CHECK(config.is_llama());
  const ShardPlan plan = PlanOf(config);
  const UnitPlan& head = plan.units[config.head_unit()];
  const UnitPlan& b = plan.units[1];
  auto at = [&b](const char* n) { return b.ParamOffset(absl::StrCat("model.layers.0.", n)); };
  const int64_t embed = Required(plan.units[0], "model.embed_tokens.weight");
  return {
      embed,
      Required(head, "model.norm.weight"),
      config.tied ? embed : Required(head, "lm_head.weight"),
      {at("input_layernorm.weight"), at("self_attn.q_proj.weight"), at("self_attn.k_proj.weight"),
       at("self_attn.v_proj.weight"), at("self_attn.q_proj.bias"), at("self_attn.k_proj.bias"),
       at("self_attn.v_proj.bias"), at("self_attn.q_norm.weight"), at("self_attn.k_norm.weight"),
       at("self_attn.o_proj.weight"), at("self_attn.o_proj.bias"),
       at("post_attention_layernorm.weight"), at("mlp.gate_proj.weight"),
       at("mlp.down_proj.weight")}};
}

}  // namespace zeroshard
