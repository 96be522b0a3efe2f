#include "worker/model/gpt_model.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/shard_plan.h"
#include "common/status_macros.h"

namespace zeroshard {
namespace {

// Element counts of every buffer Allocate makes; ModelActivationBytes and
// Allocate share them so the estimate is exact.
struct ActSizes {
  int64_t btc, bt, qkv, att, fc, logits;
};

ActSizes Sizes(const ModelConfig& c, int B, int T) {
  const int64_t bt = int64_t{B} * T;
  return {bt * c.n_embd, bt, bt * 3 * c.n_embd, int64_t{B} * c.n_head * T * T,
          bt * 4 * c.n_embd, bt * c.vocab};
}

int64_t Find(const UnitPlan& unit, const std::string& name) {
  for (const ParamPlacement& p : unit.params) {
    if (p.name == name) return p.offset;
  }
  ZS_CHECK(false && "parameter missing from the model's own units");
  return -1;
}

}  // namespace

int64_t ModelActivationBytes(const ModelConfig& c, int B, int T, ActivationCheckpointing mode) {
  const ActSizes s = Sizes(c, B, T);
  // One block's intermediates (BlockActs): ln1, atty, res2, ln2 (4 x btc),
  // 4 LayerNorm stats, qkv, att, fch and fch_gelu.
  const int64_t block = 4 * s.btc + 4 * s.bt + s.qkv + s.att + 2 * s.fc;
  // Every block's output res3, kept in both modes.
  const int64_t outputs = s.btc * c.n_layer;
  // encoded, lnf, lnf stats, logits (probs in place), losses; scratch:
  // dresidual, dln, datty, dqkv, dfch, dfch_gelu.
  const int64_t rest = 2 * s.btc + 3 * s.bt + s.logits + 3 * s.btc + s.qkv + 2 * s.fc;
  // kBlocks: one block's intermediates, the recompute workspace.
  const int64_t blocks = mode == ActivationCheckpointing::kBlocks ? 1 : c.n_layer;
  return 4 * (block * blocks + outputs + rest);
}

GptModel::GptModel(const ModelConfig& config, ActivationCheckpointing mode, Kernels& kernels)
    : config_(config), mode_(mode), k_(kernels) {
  ZS_CHECK(ValidateModelConfig(config).ok());
  absl::StatusOr<ShardPlan> plan = MakeShardPlan(ModelUnits(config), 1, 1);
  ZS_CHECK(plan.ok());
  const UnitPlan& e = plan->units[0];
  wte_ = Find(e, "wte");
  wpe_ = Find(e, "wpe");
  lnf_w_ = Find(e, "ln_f.weight");
  lnf_b_ = Find(e, "ln_f.bias");
  const UnitPlan& b = plan->units[1];
  auto f = [&b](const char* n) { return Find(b, absl::StrCat("block.0.", n)); };
  block_ = {f("ln_1.weight"), f("ln_1.bias"),     f("attn.qkv.weight"), f("attn.qkv.bias"),
            f("attn.proj.weight"), f("attn.proj.bias"), f("ln_2.weight"), f("ln_2.bias"),
            f("mlp.fc.weight"), f("mlp.fc.bias"), f("mlp.proj.weight"), f("mlp.proj.bias")};
}

absl::Status GptModel::Validate(const int32_t* inputs, const int32_t* targets, int B,
                                int T) const {
  if (inputs == nullptr || targets == nullptr) {
    return absl::InvalidArgumentError("model: inputs and targets must not be null");
  }
  if (B < 1) return absl::InvalidArgumentError(absl::StrCat("model: batch B must be >= 1, got ", B));
  if (T < 1 || T > config_.n_ctx) {
    return absl::InvalidArgumentError(absl::StrCat("model: sequence length T must be in [1, ",
                                                   config_.n_ctx, "], got ", T));
  }
  const int64_t n = int64_t{B} * T;
  // Kernel sizes are int (BLAS): the widest activation must fit.
  const int64_t widest = n * std::max(4 * int64_t{config_.n_embd}, int64_t{config_.vocab});
  if (widest > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("model: micro-batch B * T = ", n,
                                                   " tokens is too large for one call"));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (inputs[i] < 0 || inputs[i] >= config_.vocab) {
      return absl::InvalidArgumentError(absl::StrCat("model: inputs[", i, "] = ", inputs[i],
                                                     " is outside [0, ", config_.vocab, ")"));
    }
    if (targets[i] < 0 || targets[i] >= config_.vocab) {
      return absl::InvalidArgumentError(absl::StrCat("model: targets[", i, "] = ", targets[i],
                                                     " is outside [0, ", config_.vocab, ")"));
    }
  }
  return absl::OkStatus();
}

void GptModel::Allocate(int B, int T) {
  if (acts_.B == B && acts_.T == T) return;
  const ActSizes s = Sizes(config_, B, T);
  acts_.B = B;
  acts_.T = T;
  acts_.encoded.resize(s.btc);
  acts_.lnf.resize(s.btc);
  acts_.lnf_mean.resize(s.bt);
  acts_.lnf_rstd.resize(s.bt);
  acts_.logits.resize(s.logits);
  acts_.losses.resize(s.bt);
  acts_.blocks.resize(mode_ == ActivationCheckpointing::kBlocks ? 1 : config_.n_layer);
  acts_.outputs.resize(config_.n_layer);
  for (std::vector<float>& out : acts_.outputs) out.resize(s.btc);
  for (BlockActs& l : acts_.blocks) {
    for (auto* v : {&l.ln1, &l.atty, &l.res2, &l.ln2}) v->resize(s.btc);
    for (auto* v : {&l.ln1_mean, &l.ln1_rstd, &l.ln2_mean, &l.ln2_rstd}) v->resize(s.bt);
    l.qkv.resize(s.qkv);
    l.att.resize(s.att);
    l.fch.resize(s.fc);
    l.fch_gelu.resize(s.fc);
  }
  for (auto* v : {&acts_.dresidual, &acts_.dln, &acts_.datty}) v->resize(s.btc);
  acts_.dqkv.resize(s.qkv);
  acts_.dfch.resize(s.fc);
  acts_.dfch_gelu.resize(s.fc);
}

int64_t GptModel::ActivationBytes() const {
  int64_t n = 0;
  for (const auto* v : {&acts_.encoded, &acts_.lnf, &acts_.lnf_mean, &acts_.lnf_rstd,
                        &acts_.logits, &acts_.losses, &acts_.dresidual, &acts_.dln,
                        &acts_.datty, &acts_.dqkv, &acts_.dfch, &acts_.dfch_gelu}) {
    n += static_cast<int64_t>(v->size());
  }
  for (const BlockActs& l : acts_.blocks) {
    for (const auto* v : {&l.ln1, &l.ln1_mean, &l.ln1_rstd, &l.qkv, &l.att, &l.atty, &l.res2,
                          &l.ln2, &l.ln2_mean, &l.ln2_rstd, &l.fch, &l.fch_gelu}) {
      n += static_cast<int64_t>(v->size());
    }
  }
  for (const std::vector<float>& out : acts_.outputs) n += static_cast<int64_t>(out.size());
  return 4 * n;
}

absl::StatusOr<double> GptModel::ForwardBackward(const int32_t* inputs,
                                                 const int32_t* targets, int B, int T,
                                                 float loss_scale, UnitHooks& hooks) {
  ZS_RETURN_IF_ERROR(Validate(inputs, targets, B, T));
  Allocate(B, T);
  const double loss = RunForward(inputs, targets, hooks);
  RunBackward(inputs, targets, loss_scale, hooks);
  return loss;
}

absl::StatusOr<double> GptModel::Forward(const int32_t* inputs, const int32_t* targets, int B,
                                         int T, UnitHooks& hooks) {
  ZS_RETURN_IF_ERROR(Validate(inputs, targets, B, T));
  Allocate(B, T);
  return RunForward(inputs, targets, hooks);
}

absl::Status GptModel::Logits(const int32_t* inputs, int B, int T, UnitHooks& hooks,
                              std::vector<float>* logits) {
  // The inputs stand in for targets: Validate checks their range once.
  ZS_RETURN_IF_ERROR(Validate(inputs, inputs, B, T));
  Allocate(B, T);
  RunLogits(inputs, hooks);
  logits->assign(acts_.logits.begin(), acts_.logits.end());
  return absl::OkStatus();
}

}  // namespace zeroshard
