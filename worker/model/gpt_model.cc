#include "worker/model/gpt_model.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/shard_plan.h"
#include "common/status_macros.h"
#include "worker/device/device_factory.h"

namespace zeroshard {
namespace {}  // namespace

void GptModel::Size(const ModelConfig& c, ActivationCheckpointing mode, int B, int T, Acts& acts) {
  const int64_t bt = int64_t{B} * T, btc = bt * c.n_embd, qkv = bt * 3 * c.n_embd,
                att = int64_t{B} * c.n_head * T * T, fc = bt * 4 * c.n_embd;
  acts.B = B;
  acts.T = T;
  acts.blocks.resize(mode == ActivationCheckpointing::kBlocks ? 1 : c.n_layer);
  acts.outputs.resize(c.n_layer);
  for (Array* a : {&acts.encoded, &acts.lnf, &acts.dresidual, &acts.dln, &acts.datty}) a->n = btc;
  for (Array* a : {&acts.lnf_mean, &acts.lnf_rstd, &acts.losses}) a->n = bt;
  acts.logits.n = bt * c.vocab;
  acts.dqkv.n = qkv;
  acts.dfch.n = fc;
  acts.dfch_gelu.n = fc;
  for (Array& out : acts.outputs) out.n = btc;
  for (BlockActs& l : acts.blocks) {
    for (Array* a : {&l.ln1, &l.atty, &l.res2, &l.ln2}) a->n = btc;
    for (Array* a : {&l.ln1_mean, &l.ln1_rstd, &l.ln2_mean, &l.ln2_rstd}) a->n = bt;
    l.qkv.n = qkv;
    l.att.n = att;
    l.fch.n = fc;
    l.fch_gelu.n = fc;
  }
}

std::vector<GptModel::Array*> GptModel::Arrays(Acts& acts) {
  std::vector<Array*> all = {&acts.encoded, &acts.lnf,    &acts.lnf_mean,  &acts.lnf_rstd,
                             &acts.logits,  &acts.losses, &acts.dresidual, &acts.dln,
                             &acts.datty,   &acts.dqkv,   &acts.dfch,      &acts.dfch_gelu};
  for (BlockActs& l : acts.blocks) {
    for (Array* a : {&l.ln1, &l.ln1_mean, &l.ln1_rstd, &l.qkv, &l.att, &l.atty, &l.res2, &l.ln2,
                     &l.ln2_mean, &l.ln2_rstd, &l.fch, &l.fch_gelu}) {
      all.push_back(a);
    }
  }
  for (Array& out : acts.outputs) all.push_back(&out);
  return all;
}

int64_t GptActivationBytes(const ModelConfig& c, int B, int T, ActivationCheckpointing mode) {
  GptModel::Acts acts;
  GptModel::Size(c, mode, B, T, acts);
  int64_t n = 0;
  for (const ModelArray* a : GptModel::Arrays(acts)) n += a->n;
  return 4 * n;
}

GptModel::GptModel(const ModelConfig& config, ActivationCheckpointing mode, Kernels& kernels,
                   Device* device)
    : config_(config), mode_(mode), k_(kernels), rt_(kernels, device) {
  ZS_CHECK(ValidateModelConfig(config).ok() && !config.is_llama());
  const GptLayout layout = MakeGptLayout(config);
  wte_ = layout.wte;
  wpe_ = layout.wpe;
  lnf_w_ = layout.lnf_w;
  lnf_b_ = layout.lnf_b;
  block_ = layout.block;
}

absl::Status GptModel::Validate(const int32_t* inputs, const int32_t* targets, int B, int T) const {
  if (targets == nullptr) {
    return absl::InvalidArgumentError("model: inputs and targets must not be null");
  }
  // Kernel sizes are int (BLAS): the widest activation must fit.
  return rt_.Validate(config_, inputs, targets, B, T,
                      std::max(4 * int64_t{config_.n_embd}, int64_t{config_.vocab}));
}

absl::Status GptModel::Allocate(int B, int T) {
  if (acts_.B == B && acts_.T == T) return absl::OkStatus();
  Size(config_, mode_, B, T, acts_);
  absl::Status s = rt_.LayOut(Arrays(acts_));
  if (!s.ok()) acts_.B = acts_.T = 0;
  return s;
}

int64_t GptModel::ActivationBytes() const {
  int64_t n = 0;
  for (const Array* a : Arrays(const_cast<Acts&>(acts_))) n += a->n;
  return 4 * n;
}

absl::StatusOr<double> GptModel::ForwardBackward(const int32_t* inputs, const int32_t* targets,
                                                 int B, int T, float loss_scale, UnitHooks& hooks) {
  ZS_RETURN_IF_ERROR(Validate(inputs, targets, B, T));
  ZS_RETURN_IF_ERROR(Allocate(B, T));
  const int64_t bt = int64_t{B} * T;
  ZS_ASSIGN_OR_RETURN(const int32_t* in, rt_.DeviceTokens(inputs, 0, bt));
  ZS_ASSIGN_OR_RETURN(const int32_t* tg, rt_.DeviceTokens(targets, 1, bt));
  RunForward(in, tg, hooks);
  RunBackward(in, tg, loss_scale, hooks);
  return rt_.FinishCall();
}

absl::StatusOr<double> GptModel::Forward(const int32_t* inputs, const int32_t* targets, int B,
                                         int T, UnitHooks& hooks) {
  ZS_RETURN_IF_ERROR(Validate(inputs, targets, B, T));
  ZS_RETURN_IF_ERROR(Allocate(B, T));
  const int64_t bt = int64_t{B} * T;
  ZS_ASSIGN_OR_RETURN(const int32_t* in, rt_.DeviceTokens(inputs, 0, bt));
  ZS_ASSIGN_OR_RETURN(const int32_t* tg, rt_.DeviceTokens(targets, 1, bt));
  RunForward(in, tg, hooks);
  return rt_.FinishCall();
}

absl::Status GptModel::Logits(const int32_t* inputs, int B, int T, UnitHooks& hooks,
                              std::vector<float>* logits) {
  // The inputs stand in for targets: Validate checks their range once.
  ZS_RETURN_IF_ERROR(Validate(inputs, inputs, B, T));
  ZS_RETURN_IF_ERROR(Allocate(B, T));
  ZS_ASSIGN_OR_RETURN(const int32_t* in, rt_.DeviceTokens(inputs, 0, int64_t{B} * T));
  RunLogits(in, hooks);
  logits->resize(static_cast<size_t>(acts_.logits.n));
  return rt_.Finish(logits->data(), acts_.logits.data(), acts_.logits.n * 4);
}

}  // namespace zeroshard
