// The reference model: a GPT-2 layout decoder-only transformer (see
// model_config.h for the layout and units), forward and backward through the
// kernels of kernels.h. It owns no parameters: it asks UnitHooks for each
// unit's full fp32 buffer around every use and ADDS gradients into the
// buffer PreBackward returns (worker/engine/unit_hooks.h).
//
// Hook order for ForwardBackward: PreForward/PostForward(0) (embedding
// lookup), blocks 1..n_layer in order, PreForward/PostForward(0) again
// (ln_f + tied LM head); then PreBackward/PostBackward(0) (head + ln_f),
// blocks n_layer..1, PreBackward/PostBackward(0) (embedding lookup). Forward
// (evaluation) and Logits (inference) make only the forward brackets.
//
// Activations kept for backward (and backward scratch) are the model's own
// memory, reused across calls and grown to the largest micro-batch seen.
// Not thread-safe: one training thread per GptModel.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/engine/unit_hooks.h"
#include "worker/model/kernels.h"
#include "worker/model/model_config.h"

namespace zeroshard {

// Bytes of activations and backward scratch GptModel holds for a micro-batch
// of `batch` sequences of `seq_len` tokens (exact for this implementation).
// kBlocks: every block's input (B*T*C floats each) plus one block's
// activations, the recompute workspace, instead of every block's.
int64_t ModelActivationBytes(const ModelConfig& config, int batch, int seq_len,
                             ActivationCheckpointing mode = ActivationCheckpointing::kNone);

class GptModel {
 public:
  // `config` must pass ValidateModelConfig (checked). `kernels` must outlive
  // the model.
  explicit GptModel(const ModelConfig& config, Kernels& kernels = CpuKernels());

  // Forward and backward over B sequences of T tokens. inputs and targets are
  // int32 [B, T] row-major with values in [0, vocab); 1 <= T <= n_ctx.
  // Gradients of loss_scale * (sum over all B*T tokens of the cross-entropy,
  // in nats) are ADDED through the hooks. Returns that sum (unscaled), so the
  // caller can form the mean over a global batch. INVALID_ARGUMENT naming the
  // field for bad sizes, null pointers or out-of-range tokens (nothing is
  // called on the hooks then).
  absl::StatusOr<double> ForwardBackward(const int32_t* inputs, const int32_t* targets, int B,
                                         int T, float loss_scale, UnitHooks& hooks);

  // Evaluation: forward only (PreForward/PostForward brackets); returns the
  // sum of per-token losses. Errors as ForwardBackward.
  absl::StatusOr<double> Forward(const int32_t* inputs, const int32_t* targets, int B, int T,
                                 UnitHooks& hooks);

  // Inference: forward only, writing the LM head's logits (before softmax)
  // as fp32 [B, T, vocab] row-major into `logits` (resized). Errors as
  // Forward (inputs only; no targets).
  absl::Status Logits(const int32_t* inputs, int B, int T, UnitHooks& hooks,
                      std::vector<float>* logits);

  // Bytes of activation and scratch buffers currently allocated.
  int64_t ActivationBytes() const;
  const ModelConfig& config() const { return config_; }

 private:
  struct BlockOffsets {
    int64_t ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fcproj_w,
        fcproj_b;
  };
  struct LayerActs {
    std::vector<float> ln1, ln1_mean, ln1_rstd, qkv, att, atty, res2, ln2, ln2_mean, ln2_rstd,
        fch, fch_gelu, res3;
  };
  struct Acts {
    int B = 0, T = 0;
    std::vector<float> encoded, lnf, lnf_mean, lnf_rstd, logits, losses;
    std::vector<LayerActs> layers;
    // Backward scratch.
    std::vector<float> dresidual, dln, dqkv, datty, dfch, dfch_gelu;
  };

  absl::Status Validate(const int32_t* inputs, const int32_t* targets, int B, int T) const;
  void Allocate(int B, int T);
  // Embedding, blocks, ln_f and the tied head: acts_.logits holds logits.
  void RunLogits(const int32_t* inputs, UnitHooks& hooks);
  double RunForward(const int32_t* inputs, const int32_t* targets, UnitHooks& hooks);
  void RunBackward(const int32_t* inputs, const int32_t* targets, float loss_scale,
                   UnitHooks& hooks);
  void BlockForward(int layer, const float* params, const float* x);
  void BlockBackward(int layer, const UnitBackwardView& unit, const float* x);

  ModelConfig config_;
  Kernels& k_;
  int64_t wte_ = 0, wpe_ = 0, lnf_w_ = 0, lnf_b_ = 0;  // Offsets in unit 0.
  BlockOffsets block_{};                             // Same in every block unit.
  Acts acts_;
};

}  // namespace zeroshard
