// The Llama family (common/model/model_config.h, family llama): Hugging Face's
// LlamaForCausalLM, MistralForCausalLM (no sliding window),
// Qwen2ForCausalLM and Qwen3ForCausalLM as one model, forward and backward
// through the kernels of kernels.h. One block, as HF's decoder layer:
//   h = RMSNorm_in(x); q, k, v = h Wq^T (+bq), h Wk^T (+bk), h Wv^T (+bv);
//   (Qwen3: q, k = RMSNorm per head); q, k = RoPE(q), RoPE(k);
//   a = causal softmax(q k^T / sqrt(D)) v, each query head reading kv head
//   h / (NH / KV); r = x + a Wo^T (+bo);
//   out = r + down(silu(gate(RMSNorm_post(r))) * up(RMSNorm_post(r))).
// Then logits = RMSNorm_final(x) W_head^T, W_head = lm_head or the
// embedding (tied).
//
// [Note: chunked head] The LM head and the loss run over chunks of at most
// head_chunk_tokens() tokens: a chunk's [tokens x V] logits are made, turned
// into losses and, in ForwardBackward, into dlogits, the head's input
// gradient and its weight gradient before the next chunk, so the whole
// [B T x V] logits never exist (Liger-Kernel's fused linear cross-entropy
// does the same on GPUs). ForwardBackward therefore runs the head's
// forward inside the head unit's BACKWARD bracket, where both its weights
// and its gradient buffer are available: one gather of that unit a step at
// stage 3, where GPT-2's layout needs two.
//
// Hook order for ForwardBackward: PreForward/PostForward(0) (embedding),
// blocks 1..L; PreBackward/PostBackward(head_unit()) (final norm, head and
// loss, forward and backward); blocks L..1 backward; PreBackward/
// PostBackward(0) (embedding). Forward and Logits: forward brackets 0,
// 1..L, head_unit(). head_unit() is 0 when tied, L+1 when not.
// Activation checkpointing as GptModel's ([Note: activation checkpointing]
// in gpt_model.h): the recompute runs inside the block's backward bracket.
// Not thread-safe: one training thread per model.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "worker/model/causal_lm.h"
#include "worker/model/model_layout.h"
#include "worker/model/model_runtime.h"

namespace zeroshard {

// (ModelActivationBytes, causal_lm.h, gives it for either family.)
int64_t LlamaActivationBytes(const ModelConfig& config, int batch, int seq_len,
                             ActivationCheckpointing mode);

// Tokens per chunk of the LM head for a vocabulary of V: 2^25 floats (128
// MiB) of logits, at least 1 token; the memory plan counts this chunk. At
// Llama 3's V = 128,256 that is 261 tokens: head_chunk_bench measured chunks
// of 65 tokens (2^23) 34% slower than whole logits, each chunk re-reading
// and re-writing the head's weight gradient, and 256 tokens 5% slower.
int LlamaHeadChunkTokens(int vocab);

class LlamaModel : public CausalLm {
 public:
  // `config` must be a valid llama-family description (checked).
  // `head_chunk_tokens` > 0 overrides LlamaHeadChunkTokens (tests).
  LlamaModel(const ModelConfig& config,
             ActivationCheckpointing mode = ActivationCheckpointing::kNone,
             Kernels& kernels = CpuKernels(), Device* device = nullptr, int head_chunk_tokens = 0);

  absl::StatusOr<double> ForwardBackward(const int32_t* inputs, const int32_t* targets, int B,
                                         int T, float loss_scale, UnitHooks& hooks) override;
  absl::StatusOr<double> Forward(const int32_t* inputs, const int32_t* targets, int B, int T,
                                 UnitHooks& hooks) override;
  absl::Status Logits(const int32_t* inputs, int B, int T, UnitHooks& hooks,
                      std::vector<float>* logits) override;
  int64_t ActivationBytes() const override;
  void set_device_wait(absl::Duration wait) override { rt_.set_wait(wait); }
  const ModelConfig& config() const override { return config_; }
  int head_chunk_tokens() const { return chunk_; }

 private:
  friend int64_t LlamaActivationBytes(const ModelConfig&, int, int, ActivationCheckpointing);
  using Array = ModelArray;
  // Offsets of a block's parameters in its unit; -1 where the config has none.
  using BlockOffsets = LlamaLayout::Block;
  // One block's intermediates: what its backward reads besides its input.
  // q, k, v are the projections (with bias); qn, kn their per-head norms
  // (Qwen3; else unused) and the rotated values; qkv the packed, rotated
  // attention input; gu the [gate | up] projections, act their SwiGLU.
  struct BlockActs {
    Array ln1, ln1_rstd, q, k, v, qn, kn, q_rstd, k_rstd, qkv, att, atty, res2, ln2, ln2_rstd, gu,
        act;
  };
  struct Acts {
    int B = 0, T = 0;
    Array encoded, lnf, lnf_rstd, logits, losses;  // logits: one head chunk.
    std::vector<BlockActs> blocks;                 // n_layer entries, or 1 (kBlocks).
    std::vector<Array> outputs;                    // Each block's output (next block's input).
    // Backward scratch.
    Array dresidual, dln, datty, dqkv, dq, dk, dv, dqn, dkn, dgu, dact;
  };

  static void Size(const ModelConfig& config, ActivationCheckpointing mode, int chunk, int B, int T,
                   Acts& acts);
  static std::vector<Array*> Arrays(Acts& acts);
  // Token ids on the device; targets null when not given.
  struct DeviceIds {
    const int32_t* inputs = nullptr;
    const int32_t* targets = nullptr;
  };
  // Validates a call (`train`: targets required), lays the activations out
  // for [B, T] and puts the token ids on the device.
  absl::StatusOr<DeviceIds> Begin(const int32_t* inputs, const int32_t* targets, bool train, int B,
                                  int T);
  // Embedding and blocks; the last block's output is LastHidden().
  void RunBlocks(const int32_t* inputs, UnitHooks& hooks);
  // Final norm into acts_.lnf; then, for each chunk of rows [r0, r0 + n)
  // of the head, its logits into acts_.logits and then `use(r0, n)` (the
  // loss, its backward, or a copy out): the one loop of the chunked head.
  void HeadChunks(const float* params, absl::FunctionRef<void(int r0, int n)> use);
  // ForwardBackward's head bracket ([Note: chunked head]).
  void HeadForwardBackward(const int32_t* targets, float loss_scale, UnitHooks& hooks);
  void RunBackward(const int32_t* inputs, UnitHooks& hooks);
  void BlockIntermediates(int layer, const float* params, const float* x);
  void Attention(BlockActs& a, const float* p);
  void BlockOutput(int layer, const float* params);
  void BlockBackward(int layer, const UnitBackwardView& unit, const float* x);
  void AttentionBackward(const BlockActs& a, const UnitBackwardView& u);
  BlockActs& Work(int layer);
  const float* BlockInput(int layer) const;
  const float* LastHidden() const { return BlockInput(config_.n_layer); }
  void SumLosses();

  ModelConfig config_;
  ActivationCheckpointing mode_;
  Kernels& k_;
  ModelRuntime rt_;
  int chunk_ = 1;
  DeviceBuffer rope_;                          // cos then sin, [n_ctx, D/2] each, on the device.
  int64_t embed_ = 0, norm_ = 0, head_w_ = 0;  // Offsets (norm and head: in head_unit()).
  BlockOffsets block_{};
  Acts acts_;
};

}  // namespace zeroshard
