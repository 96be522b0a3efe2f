// GptModel's forward and backward passes (the rest is in gpt_model.cc).
// Buffer names follow the forward dataflow of one pre-LayerNorm block:
//   ln1 = LN_1(x); qkv = ln1 Wqkv^T + b; atty = Attention(qkv);
//   res2 = x + atty Wproj^T + b; ln2 = LN_2(res2);
//   fch = ln2 Wfc^T + b; fch_gelu = GELU(fch); res3 = res2 + fch_gelu Wp^T + b.
// Backward walks it in reverse with dresidual holding dLoss/d(residual
// stream); each linear's weight gradient is dY^T X and its input gradient dY W.
// With kBlocks, backward first recomputes the block's intermediates inside
// its PreBackward bracket ([Note: activation checkpointing] in gpt_model.h).
#include <algorithm>

#include "worker/model/gpt_model.h"

namespace zeroshard {

void GptModel::RunLogits(const int32_t* inputs, UnitHooks& hooks) {
  const int B = acts_.B, T = acts_.T, C = config_.n_embd, V = config_.vocab;
  const int BT = B * T;
  const float* p = hooks.PreForward(0);
  k_.EmbeddingForward(inputs, p + wte_, p + wpe_, B, T, C, acts_.encoded.data());
  hooks.PostForward(0);
  const float* x = acts_.encoded.data();
  for (int l = 0; l < config_.n_layer; ++l) {
    const float* params = hooks.PreForward(1 + l);
    BlockIntermediates(l, params, x);
    BlockOutput(l, params);
    hooks.PostForward(1 + l);
    x = acts_.outputs[l].data();
  }
  p = hooks.PreForward(0);
  k_.LayerNormForward(x, p + lnf_w_, p + lnf_b_, BT, C, acts_.lnf.data(), acts_.lnf_mean.data(),
                      acts_.lnf_rstd.data());
  k_.Matmul(false, true, BT, V, C, 1.0f, acts_.lnf.data(), p + wte_, 0.0f, acts_.logits.data());
  hooks.PostForward(0);
}

void GptModel::RunForward(const int32_t* inputs, const int32_t* targets, UnitHooks& hooks) {
  const int BT = acts_.B * acts_.T, V = config_.vocab;
  RunLogits(inputs, hooks);
  // Probabilities overwrite the logits (kept for backward).
  k_.SoftmaxCrossEntropyForward(acts_.logits.data(), targets, BT, V, acts_.logits.data(),
                                acts_.losses.data());
  double* sum = rt_.LossSum();
  if (sum != nullptr) k_.Sum(acts_.losses.data(), BT, sum);
}

GptModel::BlockActs& GptModel::Work(int layer) {
  return acts_.blocks[mode_ == ActivationCheckpointing::kBlocks ? 0 : layer];
}

const float* GptModel::BlockInput(int layer) const {
  return layer == 0 ? acts_.encoded.data() : acts_.outputs[layer - 1].data();
}

void GptModel::BlockIntermediates(int layer, const float* p, const float* x) {
  const int B = acts_.B, T = acts_.T, C = config_.n_embd, NH = config_.n_head;
  const int BT = B * T;
  const BlockOffsets& o = block_;
  BlockActs& a = Work(layer);
  k_.LayerNormForward(x, p + o.ln1_w, p + o.ln1_b, BT, C, a.ln1.data(), a.ln1_mean.data(),
                      a.ln1_rstd.data());
  k_.Matmul(false, true, BT, 3 * C, C, 1.0f, a.ln1.data(), p + o.qkv_w, 0.0f, a.qkv.data());
  k_.BiasAdd(a.qkv.data(), p + o.qkv_b, BT, 3 * C);
  k_.AttentionForward(a.qkv.data(), B, T, C, NH, a.atty.data(), a.att.data());
  k_.Matmul(false, true, BT, C, C, 1.0f, a.atty.data(), p + o.proj_w, 0.0f, a.res2.data());
  k_.BiasAdd(a.res2.data(), p + o.proj_b, BT, C);
  k_.Accumulate(x, int64_t{BT} * C, a.res2.data());
  k_.LayerNormForward(a.res2.data(), p + o.ln2_w, p + o.ln2_b, BT, C, a.ln2.data(),
                      a.ln2_mean.data(), a.ln2_rstd.data());
  k_.Matmul(false, true, BT, 4 * C, C, 1.0f, a.ln2.data(), p + o.fc_w, 0.0f, a.fch.data());
  k_.BiasAdd(a.fch.data(), p + o.fc_b, BT, 4 * C);
  k_.GeluForward(a.fch.data(), int64_t{BT} * 4 * C, a.fch_gelu.data());
}

void GptModel::BlockOutput(int layer, const float* p) {
  const int BT = acts_.B * acts_.T, C = config_.n_embd;
  const BlockOffsets& o = block_;
  BlockActs& a = Work(layer);
  float* res3 = acts_.outputs[layer].data();
  k_.Matmul(false, true, BT, C, 4 * C, 1.0f, a.fch_gelu.data(), p + o.fcproj_w, 0.0f, res3);
  k_.BiasAdd(res3, p + o.fcproj_b, BT, C);
  k_.Accumulate(a.res2.data(), int64_t{BT} * C, res3);
}

void GptModel::RunBackward(const int32_t* inputs, const int32_t* targets, float loss_scale,
                           UnitHooks& hooks) {
  const int B = acts_.B, T = acts_.T, C = config_.n_embd, V = config_.vocab;
  const int BT = B * T;
  float* dlogits = acts_.logits.data();  // In place over the probabilities.
  k_.SoftmaxCrossEntropyBackward(acts_.logits.data(), targets, BT, V, loss_scale, dlogits);
  const float* x_last = BlockInput(config_.n_layer);  // ln_f's input.
  rt_.Zero(acts_.dresidual);
  UnitBackwardView u = hooks.PreBackward(0);
  k_.Matmul(false, false, BT, C, V, 1.0f, dlogits, u.params + wte_, 0.0f, acts_.dln.data());
  k_.Matmul(true, false, V, C, BT, 1.0f, dlogits, acts_.lnf.data(), 1.0f, u.grads + wte_);
  k_.LayerNormBackward(acts_.dln.data(), x_last, u.params + lnf_w_, acts_.lnf_mean.data(),
                       acts_.lnf_rstd.data(), BT, C, acts_.dresidual.data(), u.grads + lnf_w_,
                       u.grads + lnf_b_);
  hooks.PostBackward(0);
  for (int l = config_.n_layer - 1; l >= 0; --l) {
    const UnitBackwardView unit = hooks.PreBackward(1 + l);
    // [Note: activation checkpointing]: the backward gather's parameters.
    if (mode_ == ActivationCheckpointing::kBlocks) {
      BlockIntermediates(l, unit.params, BlockInput(l));
    }
    BlockBackward(l, unit, BlockInput(l));
    hooks.PostBackward(1 + l);
  }
  u = hooks.PreBackward(0);
  k_.EmbeddingBackward(acts_.dresidual.data(), inputs, B, T, C, u.grads + wte_, u.grads + wpe_);
  hooks.PostBackward(0);
}

void GptModel::BlockBackward(int layer, const UnitBackwardView& u, const float* x) {
  const int B = acts_.B, T = acts_.T, C = config_.n_embd, NH = config_.n_head;
  const int BT = B * T;
  const BlockOffsets& o = block_;
  const BlockActs& a = Work(layer);
  const float* p = u.params;
  float* g = u.grads;
  float* dres = acts_.dresidual.data();  // d res3 on entry; d x on exit.
  float* dln = acts_.dln.data();
  // MLP: res3 = res2 + fch_gelu Wp^T + b.
  k_.BiasBackward(dres, BT, C, g + o.fcproj_b);
  k_.Matmul(true, false, C, 4 * C, BT, 1.0f, dres, a.fch_gelu.data(), 1.0f, g + o.fcproj_w);
  k_.Matmul(false, false, BT, 4 * C, C, 1.0f, dres, p + o.fcproj_w, 0.0f, acts_.dfch_gelu.data());
  rt_.Zero(acts_.dfch);
  k_.GeluBackward(a.fch.data(), acts_.dfch_gelu.data(), int64_t{BT} * 4 * C, acts_.dfch.data());
  k_.BiasBackward(acts_.dfch.data(), BT, 4 * C, g + o.fc_b);
  k_.Matmul(true, false, 4 * C, C, BT, 1.0f, acts_.dfch.data(), a.ln2.data(), 1.0f, g + o.fc_w);
  k_.Matmul(false, false, BT, C, 4 * C, 1.0f, acts_.dfch.data(), p + o.fc_w, 0.0f, dln);
  k_.LayerNormBackward(dln, a.res2.data(), p + o.ln2_w, a.ln2_mean.data(), a.ln2_rstd.data(), BT, C,
                       dres, g + o.ln2_w, g + o.ln2_b);
  // Attention: res2 = x + atty Wproj^T + b.
  k_.BiasBackward(dres, BT, C, g + o.proj_b);
  k_.Matmul(true, false, C, C, BT, 1.0f, dres, a.atty.data(), 1.0f, g + o.proj_w);
  k_.Matmul(false, false, BT, C, C, 1.0f, dres, p + o.proj_w, 0.0f, acts_.datty.data());
  rt_.Zero(acts_.dqkv);
  k_.AttentionBackward(acts_.datty.data(), a.qkv.data(), a.att.data(), B, T, C, NH,
                       acts_.dqkv.data());
  k_.BiasBackward(acts_.dqkv.data(), BT, 3 * C, g + o.qkv_b);
  k_.Matmul(true, false, 3 * C, C, BT, 1.0f, acts_.dqkv.data(), a.ln1.data(), 1.0f, g + o.qkv_w);
  k_.Matmul(false, false, BT, C, 3 * C, 1.0f, acts_.dqkv.data(), p + o.qkv_w, 0.0f, dln);
  k_.LayerNormBackward(dln, x, p + o.ln1_w, a.ln1_mean.data(), a.ln1_rstd.data(), BT, C, dres,
                       g + o.ln1_w, g + o.ln1_b);
}

}  // namespace zeroshard
