#include "worker/model/llama_decoder.h"

#include <algorithm>
#include <utility>

#include "common/status_macros.h"

namespace zeroshard {

LlamaDecoder::LlamaDecoder(const ModelConfig& config, const DecodeTarget& target)
    : KvDecoder(config, target, config.kv_heads(), config.head_size()),
      layout_(MakeLlamaLayout(config)),
      rope_(MakeRopeTables(config, positions())) {}

absl::Status LlamaDecoder::PlaceTables() {
  ZS_ASSIGN_OR_RETURN(cos_, Place(rope_.cos, &cos_held_));
  ZS_ASSIGN_OR_RETURN(sin_, Place(rope_.sin, &sin_held_));
  return absl::OkStatus();
}

absl::Status LlamaDecoder::Run(const int32_t* tokens, int n, const float** logits) {
  const int C = config_.n_embd, V = config_.vocab, I = config_.n_inner;
  const int64_t Q = int64_t{config_.n_head} * config_.head_size();
  const int64_t K = int64_t{config_.kv_heads()} * config_.head_size();
  x_.n = ln_.n = res_.n = int64_t{n} * C;
  q_.n = qn_.n = att_.n = n * Q;
  k_new_.n = kn_.n = v_new_.n = n * K;
  gu_.n = 2 * int64_t{n} * I;
  act_.n = int64_t{n} * I;
  rstd_.n = std::max<int64_t>(n, int64_t{n} * config_.n_head);
  logits_.n = V;
  ZS_RETURN_IF_ERROR(rt_.LayOut(
      {&x_, &ln_, &q_, &qn_, &k_new_, &kn_, &v_new_, &att_, &res_, &gu_, &act_, &rstd_, &logits_}));
  ZS_ASSIGN_OR_RETURN(const int32_t* ids, rt_.DeviceTokens(tokens, 0, n));
  k_.EmbeddingForward(ids, unit(0) + layout_.embed, nullptr, 1, n, C, x_.data());
  for (int l = 0; l < config_.n_layer; ++l) Block(l, n);
  const float* head = unit(config_.head_unit());
  const float* w = (config_.tied ? unit(0) : head) + layout_.head_w;
  k_.RmsNormForward(x_.data() + int64_t{n - 1} * C, head + layout_.norm, 1, C,
                    static_cast<float>(config_.norm_eps), ln_.data(), rstd_.data());
  k_.Matmul(false, true, 1, V, C, 1.0f, ln_.data(), w, 0.0f, logits_.data());
  *logits = logits_.data();
  return absl::OkStatus();
}

// q, k, v of the new tokens: projections, biases, per-head norms, rotary at
// their positions.
void LlamaDecoder::Project(const float* p, int n) {
  const int C = config_.n_embd, D = config_.head_size(), NH = config_.n_head;
  const int KV = config_.kv_heads(), Q = NH * D, K = KV * D;
  const float eps = static_cast<float>(config_.norm_eps);
  k_.Matmul(false, true, n, Q, C, 1.0f, ln_.data(), p + layout_.block.q_w, 0.0f, q_.data());
  k_.Matmul(false, true, n, K, C, 1.0f, ln_.data(), p + layout_.block.k_w, 0.0f, k_new_.data());
  k_.Matmul(false, true, n, K, C, 1.0f, ln_.data(), p + layout_.block.v_w, 0.0f, v_new_.data());
  if (config_.qkv_bias) {
    k_.BiasAdd(q_.data(), p + layout_.block.q_b, n, Q);
    k_.BiasAdd(k_new_.data(), p + layout_.block.k_b, n, K);
    k_.BiasAdd(v_new_.data(), p + layout_.block.v_b, n, K);
  }
  if (config_.qk_norm) {
    k_.RmsNormForward(q_.data(), p + layout_.block.q_norm, n * NH, D, eps, qn_.data(),
                      rstd_.data());
    k_.RmsNormForward(k_new_.data(), p + layout_.block.k_norm, n * KV, D, eps, kn_.data(),
                      rstd_.data());
    std::swap(q_, qn_);
    std::swap(k_new_, kn_);
  }
  const int64_t row = int64_t{pos_} * D / 2;
  k_.Rope(q_.data(), 1, n, NH, D, cos_ + row, sin_ + row, false);
  k_.Rope(k_new_.data(), 1, n, KV, D, cos_ + row, sin_ + row, false);
}

void LlamaDecoder::Block(int layer, int n) {
  const int C = config_.n_embd, I = config_.n_inner, Q = config_.n_head * config_.head_size();
  const float eps = static_cast<float>(config_.norm_eps);
  const float* p = unit(1 + layer);
  k_.RmsNormForward(x_.data(), p + layout_.block.ln1, n, C, eps, ln_.data(), rstd_.data());
  Project(p, n);
  const int64_t K = int64_t{config_.kv_heads()} * config_.head_size();
  cache_.Attend(k_, layer, pos_, n, {q_.data(), Q}, {k_new_.data(), K}, {v_new_.data(), K},
                att_.data());
  k_.Matmul(false, true, n, C, Q, 1.0f, att_.data(), p + layout_.block.o_w, 0.0f, res_.data());
  if (config_.o_bias) k_.BiasAdd(res_.data(), p + layout_.block.o_b, n, C);
  k_.Accumulate(x_.data(), int64_t{n} * C, res_.data());
  k_.RmsNormForward(res_.data(), p + layout_.block.ln2, n, C, eps, ln_.data(), rstd_.data());
  k_.Matmul(false, true, n, 2 * I, C, 1.0f, ln_.data(), p + layout_.block.gate_up, 0.0f,
            gu_.data());
  k_.SwigluForward(gu_.data(), n, I, act_.data());
  k_.Matmul(false, true, n, C, I, 1.0f, act_.data(), p + layout_.block.down, 0.0f, x_.data());
  k_.Accumulate(res_.data(), int64_t{n} * C, x_.data());
}

}  // namespace zeroshard
