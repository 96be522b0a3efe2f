#include "worker/model/llama_decoder.h"

#include <algorithm>

namespace zeroshard {
LlamaDecoder::LlamaDecoder(const ModelConfig& config, const std::vector<std::vector<float>>& units)
    : KvDecoder(config),
      units_(units),
      k_(CpuKernels()),
      layout_(MakeLlamaLayout(config)),
      rope_(MakeRopeTables(config, config.n_ctx)),
      cache_(config.n_layer, config.n_head, config.kv_heads(), config.head_size(), config.n_ctx) {}

void LlamaDecoder::Run(absl::Span<const int32_t> tokens, std::vector<float>* logits) {
  const int n = static_cast<int>(tokens.size()), C = config_.n_embd, V = config_.vocab;
  x_.resize(int64_t{n} * C);
  k_.EmbeddingForward(tokens.data(), units_[0].data() + layout_.embed, nullptr, 1, n, C, x_.data());
  for (int l = 0; l < config_.n_layer; ++l) Block(l, n);
  const float* head = units_[config_.head_unit()].data();
  const float* w = (config_.tied ? units_[0].data() : head) + layout_.head_w;
  lnf_.resize(C);
  rstd_.resize(std::max<size_t>(rstd_.size(), 1));
  k_.RmsNormForward(x_.data() + int64_t{n - 1} * C, head + layout_.norm, 1, C,
                    static_cast<float>(config_.norm_eps), lnf_.data(), rstd_.data());
  logits->resize(V);
  k_.Matmul(false, true, 1, V, C, 1.0f, lnf_.data(), w, 0.0f, logits->data());
}

// q, k, v of the new tokens: projections, biases, per-head norms, rotary at
// their positions.
void LlamaDecoder::Project(const float* p, int n) {
  const int C = config_.n_embd, D = config_.head_size(), NH = config_.n_head;
  const int KV = config_.kv_heads(), Q = NH * D, K = KV * D;
  const float eps = static_cast<float>(config_.norm_eps);
  q_.resize(int64_t{n} * Q);
  k_new_.resize(int64_t{n} * K);
  v_new_.resize(int64_t{n} * K);
  k_.Matmul(false, true, n, Q, C, 1.0f, ln_.data(), p + layout_.block.q_w, 0.0f, q_.data());
  k_.Matmul(false, true, n, K, C, 1.0f, ln_.data(), p + layout_.block.k_w, 0.0f, k_new_.data());
  k_.Matmul(false, true, n, K, C, 1.0f, ln_.data(), p + layout_.block.v_w, 0.0f, v_new_.data());
  if (config_.qkv_bias) {
    k_.BiasAdd(q_.data(), p + layout_.block.q_b, n, Q);
    k_.BiasAdd(k_new_.data(), p + layout_.block.k_b, n, K);
    k_.BiasAdd(v_new_.data(), p + layout_.block.v_b, n, K);
  }
  if (config_.qk_norm) {
    rstd_.resize(int64_t{n} * NH);
    qn_.resize(q_.size());
    kn_.resize(k_new_.size());
    k_.RmsNormForward(q_.data(), p + layout_.block.q_norm, n * NH, D, eps, qn_.data(),
                      rstd_.data());
    k_.RmsNormForward(k_new_.data(), p + layout_.block.k_norm, n * KV, D, eps, kn_.data(),
                      rstd_.data());
    q_.swap(qn_);
    k_new_.swap(kn_);
  }
  const int64_t row = int64_t{pos_} * D / 2;
  k_.Rope(q_.data(), 1, n, NH, D, rope_.cos.data() + row, rope_.sin.data() + row, false);
  k_.Rope(k_new_.data(), 1, n, KV, D, rope_.cos.data() + row, rope_.sin.data() + row, false);
}

void LlamaDecoder::Block(int layer, int n) {
  const int C = config_.n_embd, I = config_.n_inner, Q = config_.n_head * config_.head_size();
  const float eps = static_cast<float>(config_.norm_eps);
  const float* p = units_[1 + layer].data();
  ln_.resize(int64_t{n} * C);
  rstd_.resize(std::max<int64_t>(n, int64_t{n} * config_.n_head));
  k_.RmsNormForward(x_.data(), p + layout_.block.ln1, n, C, eps, ln_.data(), rstd_.data());
  Project(p, n);
  const int64_t K = int64_t{config_.kv_heads()} * config_.head_size();
  att_.resize(int64_t{n} * Q);
  cache_.Attend(k_, layer, pos_, n, {q_.data(), Q}, {k_new_.data(), K}, {v_new_.data(), K},
                att_.data());
  res_.resize(int64_t{n} * C);
  k_.Matmul(false, true, n, C, Q, 1.0f, att_.data(), p + layout_.block.o_w, 0.0f, res_.data());
  if (config_.o_bias) k_.BiasAdd(res_.data(), p + layout_.block.o_b, n, C);
  k_.Accumulate(x_.data(), int64_t{n} * C, res_.data());
  k_.RmsNormForward(res_.data(), p + layout_.block.ln2, n, C, eps, ln_.data(), rstd_.data());
  gu_.resize(int64_t{n} * 2 * I);
  act_.resize(int64_t{n} * I);
  k_.Matmul(false, true, n, 2 * I, C, 1.0f, ln_.data(), p + layout_.block.gate_up, 0.0f,
            gu_.data());
  k_.SwigluForward(gu_.data(), n, I, act_.data());
  k_.Matmul(false, true, n, C, I, 1.0f, act_.data(), p + layout_.block.down, 0.0f, x_.data());
  k_.Accumulate(res_.data(), int64_t{n} * C, x_.data());
}

}  // namespace zeroshard
