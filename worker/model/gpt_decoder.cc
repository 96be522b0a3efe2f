#include "worker/model/gpt_decoder.h"

#include "common/status_macros.h"

namespace zeroshard {

GptDecoder::GptDecoder(const ModelConfig& config, const DecodeTarget& target)
    : KvDecoder(config, target, config.n_head, config.n_embd / config.n_head),
      layout_(MakeGptLayout(config)) {}

absl::Status GptDecoder::Run(const int32_t* tokens, int n, const float** logits) {
  const int C = config_.n_embd, V = config_.vocab;
  const int64_t nC = int64_t{n} * C;
  x_.n = ln_.n = att_.n = res_.n = nC;
  qkv_.n = 3 * nC;
  fc_.n = gelu_.n = 4 * nC;
  mean_.n = rstd_.n = n;
  logits_.n = V;
  ZS_RETURN_IF_ERROR(
      rt_.LayOut({&x_, &ln_, &qkv_, &att_, &res_, &fc_, &gelu_, &mean_, &rstd_, &logits_}));
  ZS_ASSIGN_OR_RETURN(const int32_t* ids, rt_.DeviceTokens(tokens, 0, n));
  const float* e = unit(0);
  // Positions pos_ .. pos_ + n - 1: the position table from row pos_.
  k_.EmbeddingForward(ids, e + layout_.wte, e + layout_.wpe + int64_t{pos_} * C, 1, n, C,
                      x_.data());
  for (int l = 0; l < config_.n_layer; ++l) Block(l, n);
  k_.LayerNormForward(x_.data() + int64_t{n - 1} * C, e + layout_.lnf_w, e + layout_.lnf_b, 1, C,
                      ln_.data(), mean_.data(), rstd_.data());
  k_.Matmul(false, true, 1, V, C, 1.0f, ln_.data(), e + layout_.wte, 0.0f, logits_.data());
  *logits = logits_.data();
  return absl::OkStatus();
}

void GptDecoder::Block(int layer, int n) {
  const int C = config_.n_embd;
  const int64_t nC = int64_t{n} * C;
  const float* p = unit(1 + layer);
  k_.LayerNormForward(x_.data(), p + layout_.block.ln1_w, p + layout_.block.ln1_b, n, C, ln_.data(),
                      mean_.data(), rstd_.data());
  k_.Matmul(false, true, n, 3 * C, C, 1.0f, ln_.data(), p + layout_.block.qkv_w, 0.0f, qkv_.data());
  k_.BiasAdd(qkv_.data(), p + layout_.block.qkv_b, n, 3 * C);
  cache_.Attend(k_, layer, pos_, n, {qkv_.data(), 3 * C}, {qkv_.data() + C, 3 * C},
                {qkv_.data() + 2 * C, 3 * C}, att_.data());
  k_.Matmul(false, true, n, C, C, 1.0f, att_.data(), p + layout_.block.proj_w, 0.0f, res_.data());
  k_.BiasAdd(res_.data(), p + layout_.block.proj_b, n, C);
  k_.Accumulate(x_.data(), nC, res_.data());
  k_.LayerNormForward(res_.data(), p + layout_.block.ln2_w, p + layout_.block.ln2_b, n, C,
                      ln_.data(), mean_.data(), rstd_.data());
  k_.Matmul(false, true, n, 4 * C, C, 1.0f, ln_.data(), p + layout_.block.fc_w, 0.0f, fc_.data());
  k_.BiasAdd(fc_.data(), p + layout_.block.fc_b, n, 4 * C);
  k_.GeluForward(fc_.data(), 4 * nC, gelu_.data());
  k_.Matmul(false, true, n, C, 4 * C, 1.0f, gelu_.data(), p + layout_.block.fcproj_w, 0.0f,
            x_.data());
  k_.BiasAdd(x_.data(), p + layout_.block.fcproj_b, n, C);
  k_.Accumulate(res_.data(), nC, x_.data());
}

}  // namespace zeroshard
