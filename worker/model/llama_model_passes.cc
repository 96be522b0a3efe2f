// LlamaModel's forward and backward passes (the rest is in
// llama_model.cc). Buffer names follow one block's forward dataflow
// (llama_model.h); backward walks it in reverse with dresidual holding
// dLoss/d(residual stream). Each linear's weight gradient is dY^T X and its
// input gradient dY W.
#include <algorithm>

#include "worker/model/llama_model.h"

namespace zeroshard {

LlamaModel::BlockActs& LlamaModel::Work(int layer) {
  return acts_.blocks[mode_ == ActivationCheckpointing::kBlocks ? 0 : layer];
}

const float* LlamaModel::BlockInput(int layer) const {
  return layer == 0 ? acts_.encoded.data() : acts_.outputs[layer - 1].data();
}

void LlamaModel::SumLosses() {
  double* sum = rt_.LossSum();
  if (sum != nullptr) k_.Sum(acts_.losses.data(), int64_t{acts_.B} * acts_.T, sum);
}

void LlamaModel::RunBlocks(const int32_t* inputs, UnitHooks& hooks) {
  const float* p = hooks.PreForward(0);
  k_.EmbeddingForward(inputs, p + embed_, nullptr, acts_.B, acts_.T, config_.n_embd,
                      acts_.encoded.data());
  hooks.PostForward(0);
  for (int l = 0; l < config_.n_layer; ++l) {
    const float* params = hooks.PreForward(1 + l);
    BlockIntermediates(l, params, BlockInput(l));
    BlockOutput(l, params);
    hooks.PostForward(1 + l);
  }
}

void LlamaModel::HeadChunks(const float* p, absl::FunctionRef<void(int r0, int n)> use) {
  const int BT = acts_.B * acts_.T, C = config_.n_embd;
  k_.RmsNormForward(LastHidden(), p + norm_, BT, C, static_cast<float>(config_.norm_eps),
                    acts_.lnf.data(), acts_.lnf_rstd.data());
  for (int r0 = 0; r0 < BT; r0 += chunk_) {
    const int n = std::min(chunk_, BT - r0);
    k_.Matmul(false, true, n, config_.vocab, C, 1.0f, acts_.lnf.data() + int64_t{r0} * C,
              p + head_w_, 0.0f, acts_.logits.data());
    use(r0, n);
  }
}

void LlamaModel::HeadForwardBackward(const int32_t* targets, float loss_scale, UnitHooks& hooks) {
  const int BT = acts_.B * acts_.T, C = config_.n_embd, V = config_.vocab;
  const int head = config_.head_unit();
  const UnitBackwardView u = hooks.PreBackward(head);
  float* logits = acts_.logits.data();
  HeadChunks(u.params, [&](int r0, int n) {
    k_.SoftmaxCrossEntropyForward(logits, targets + r0, n, V, logits, acts_.losses.data() + r0);
    k_.SoftmaxCrossEntropyBackward(logits, targets + r0, n, V, loss_scale, logits);
    k_.Matmul(false, false, n, C, V, 1.0f, logits, u.params + head_w_, 0.0f,
              acts_.dln.data() + int64_t{r0} * C);
    k_.Matmul(true, false, V, C, n, 1.0f, logits, acts_.lnf.data() + int64_t{r0} * C, 1.0f,
              u.grads + head_w_);
  });
  rt_.Zero(acts_.dresidual);
  k_.RmsNormBackward(acts_.dln.data(), LastHidden(), u.params + norm_, acts_.lnf_rstd.data(), BT, C,
                     acts_.dresidual.data(), u.grads + norm_);
  hooks.PostBackward(head);
  SumLosses();
}

void LlamaModel::RunBackward(const int32_t* inputs, UnitHooks& hooks) {
  for (int l = config_.n_layer - 1; l >= 0; --l) {
    const UnitBackwardView unit = hooks.PreBackward(1 + l);
    // [Note: activation checkpointing] (gpt_model.h): the backward gather's parameters.
    if (mode_ == ActivationCheckpointing::kBlocks) {
      BlockIntermediates(l, unit.params, BlockInput(l));
    }
    BlockBackward(l, unit, BlockInput(l));
    hooks.PostBackward(1 + l);
  }
  const UnitBackwardView u = hooks.PreBackward(0);
  k_.EmbeddingBackward(acts_.dresidual.data(), inputs, acts_.B, acts_.T, config_.n_embd,
                       u.grads + embed_, nullptr);
  hooks.PostBackward(0);
}

void LlamaModel::BlockIntermediates(int layer, const float* p, const float* x) {
  const int BT = acts_.B * acts_.T, C = config_.n_embd, I = config_.n_inner;
  const float eps = static_cast<float>(config_.norm_eps);
  const BlockOffsets& o = block_;
  BlockActs& a = Work(layer);
  k_.RmsNormForward(x, p + o.ln1, BT, C, eps, a.ln1.data(), a.ln1_rstd.data());
  Attention(a, p);
  k_.Accumulate(x, int64_t{BT} * C, a.res2.data());
  k_.RmsNormForward(a.res2.data(), p + o.ln2, BT, C, eps, a.ln2.data(), a.ln2_rstd.data());
  k_.Matmul(false, true, BT, 2 * I, C, 1.0f, a.ln2.data(), p + o.gate_up, 0.0f, a.gu.data());
  k_.SwigluForward(a.gu.data(), BT, I, a.act.data());
}

// ln1 -> q, k, v -> (per-head norms) -> rotary -> packed qkv -> attention ->
// o_proj into res2 (the residual is added by the caller).
void LlamaModel::Attention(BlockActs& a, const float* p) {
  const int B = acts_.B, T = acts_.T, BT = B * T, C = config_.n_embd, D = config_.head_size();
  const int NH = config_.n_head, KV = config_.kv_heads(), Q = NH * D, K = KV * D;
  const float eps = static_cast<float>(config_.norm_eps);
  const BlockOffsets& o = block_;
  k_.Matmul(false, true, BT, Q, C, 1.0f, a.ln1.data(), p + o.q_w, 0.0f, a.q.data());
  k_.Matmul(false, true, BT, K, C, 1.0f, a.ln1.data(), p + o.k_w, 0.0f, a.k.data());
  k_.Matmul(false, true, BT, K, C, 1.0f, a.ln1.data(), p + o.v_w, 0.0f, a.v.data());
  if (config_.qkv_bias) {
    k_.BiasAdd(a.q.data(), p + o.q_b, BT, Q);
    k_.BiasAdd(a.k.data(), p + o.k_b, BT, K);
    k_.BiasAdd(a.v.data(), p + o.v_b, BT, K);
  }
  float* qr = a.q.data();
  float* kr = a.k.data();
  if (config_.qk_norm) {
    k_.RmsNormForward(a.q.data(), p + o.q_norm, BT * NH, D, eps, a.qn.data(), a.q_rstd.data());
    k_.RmsNormForward(a.k.data(), p + o.k_norm, BT * KV, D, eps, a.kn.data(), a.k_rstd.data());
    qr = a.qn.data();
    kr = a.kn.data();
  }
  const int64_t half = int64_t{config_.n_ctx} * D / 2;
  const float* cos = rope_.as<float>();
  k_.Rope(qr, B, T, NH, D, cos, cos + half, false);
  k_.Rope(kr, B, T, KV, D, cos, cos + half, false);
  k_.PackQkv(qr, kr, a.v.data(), BT, NH, KV, D, a.qkv.data());
  k_.AttentionForward(a.qkv.data(), B, T, Q, NH, a.atty.data(), a.att.data());
  k_.Matmul(false, true, BT, C, Q, 1.0f, a.atty.data(), p + o.o_w, 0.0f, a.res2.data());
  if (config_.o_bias) k_.BiasAdd(a.res2.data(), p + o.o_b, BT, C);
}

void LlamaModel::BlockOutput(int layer, const float* p) {
  const int BT = acts_.B * acts_.T, C = config_.n_embd, I = config_.n_inner;
  BlockActs& a = Work(layer);
  float* out = acts_.outputs[layer].data();
  k_.Matmul(false, true, BT, C, I, 1.0f, a.act.data(), p + block_.down, 0.0f, out);
  k_.Accumulate(a.res2.data(), int64_t{BT} * C, out);
}

void LlamaModel::BlockBackward(int layer, const UnitBackwardView& u, const float* x) {
  const int BT = acts_.B * acts_.T, C = config_.n_embd, I = config_.n_inner;
  const BlockOffsets& o = block_;
  const BlockActs& a = Work(layer);
  const float* p = u.params;
  float* g = u.grads;
  float* dres = acts_.dresidual.data();  // d out on entry; d x on exit.
  float* dln = acts_.dln.data();
  // MLP: out = res2 + act Wdown^T, act = SwiGLU(ln2 [Wgate; Wup]^T).
  k_.Matmul(true, false, C, I, BT, 1.0f, dres, a.act.data(), 1.0f, g + o.down);
  k_.Matmul(false, false, BT, I, C, 1.0f, dres, p + o.down, 0.0f, acts_.dact.data());
  k_.SwigluBackward(a.gu.data(), acts_.dact.data(), BT, I, acts_.dgu.data());
  k_.Matmul(true, false, 2 * I, C, BT, 1.0f, acts_.dgu.data(), a.ln2.data(), 1.0f, g + o.gate_up);
  k_.Matmul(false, false, BT, C, 2 * I, 1.0f, acts_.dgu.data(), p + o.gate_up, 0.0f, dln);
  k_.RmsNormBackward(dln, a.res2.data(), p + o.ln2, a.ln2_rstd.data(), BT, C, dres, g + o.ln2);
  // Attention: res2 = x + atty Wo^T (+ bo).
  AttentionBackward(a, u);
  k_.RmsNormBackward(dln, x, p + o.ln1, a.ln1_rstd.data(), BT, C, dres, g + o.ln1);
}

// From dresidual (d res2) to dln (d ln1), adding every attention gradient.
void LlamaModel::AttentionBackward(const BlockActs& a, const UnitBackwardView& u) {
  const int B = acts_.B, T = acts_.T, BT = B * T, C = config_.n_embd, D = config_.head_size();
  const int NH = config_.n_head, KV = config_.kv_heads(), Q = NH * D, K = KV * D;
  const BlockOffsets& o = block_;
  const float* p = u.params;
  float* g = u.grads;
  float* dres = acts_.dresidual.data();
  if (config_.o_bias) k_.BiasBackward(dres, BT, C, g + o.o_b);
  k_.Matmul(true, false, C, Q, BT, 1.0f, dres, a.atty.data(), 1.0f, g + o.o_w);
  k_.Matmul(false, false, BT, Q, C, 1.0f, dres, p + o.o_w, 0.0f, acts_.datty.data());
  rt_.Zero(acts_.dqkv);
  k_.AttentionBackward(acts_.datty.data(), a.qkv.data(), a.att.data(), B, T, Q, NH,
                       acts_.dqkv.data());
  float* dq = acts_.dq.data();
  float* dk = acts_.dk.data();
  float* dv = acts_.dv.data();
  k_.UnpackQkvGrad(acts_.dqkv.data(), BT, NH, KV, D, dq, dk, dv);
  const int64_t half = int64_t{config_.n_ctx} * D / 2;
  const float* cos = rope_.as<float>();
  k_.Rope(dq, B, T, NH, D, cos, cos + half, true);
  k_.Rope(dk, B, T, KV, D, cos, cos + half, true);
  if (config_.qk_norm) {
    rt_.Zero(acts_.dqn);
    rt_.Zero(acts_.dkn);
    k_.RmsNormBackward(dq, a.q.data(), p + o.q_norm, a.q_rstd.data(), BT * NH, D, acts_.dqn.data(),
                       g + o.q_norm);
    k_.RmsNormBackward(dk, a.k.data(), p + o.k_norm, a.k_rstd.data(), BT * KV, D, acts_.dkn.data(),
                       g + o.k_norm);
    dq = acts_.dqn.data();
    dk = acts_.dkn.data();
  }
  if (config_.qkv_bias) {
    k_.BiasBackward(dq, BT, Q, g + o.q_b);
    k_.BiasBackward(dk, BT, K, g + o.k_b);
    k_.BiasBackward(dv, BT, K, g + o.v_b);
  }
  const float* ln1 = a.ln1.data();
  float* dln = acts_.dln.data();
  k_.Matmul(true, false, Q, C, BT, 1.0f, dq, ln1, 1.0f, g + o.q_w);
  k_.Matmul(true, false, K, C, BT, 1.0f, dk, ln1, 1.0f, g + o.k_w);
  k_.Matmul(true, false, K, C, BT, 1.0f, dv, ln1, 1.0f, g + o.v_w);
  k_.Matmul(false, false, BT, C, Q, 1.0f, dq, p + o.q_w, 0.0f, dln);
  k_.Matmul(false, false, BT, C, K, 1.0f, dk, p + o.k_w, 1.0f, dln);
  k_.Matmul(false, false, BT, C, K, 1.0f, dv, p + o.v_w, 1.0f, dln);
}

}  // namespace zeroshard
