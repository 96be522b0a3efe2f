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
// memory: one allocation of its Device (the CPU's host memory, or a GPU's
// memory for CudaKernels), grown to the largest micro-batch seen and
// reused. On a device other than the CPU the token ids are copied into
// device memory each call (stream-ordered), and the loss is summed on the
// device (Kernels::Sum): one double per call crosses to the host. Every
// parameter and gradient pointer the hooks hand out must be memory of that
// Device, as every pointer the kernels get is.
// Not thread-safe: one training thread per GptModel.
//
// [Note: activation checkpointing] With ActivationCheckpointing::kBlocks
// (Chen et al., 2016, "Training Deep Nets with Sublinear Memory Cost",
// section 3, one checkpoint per block) forward keeps only each block's
// output, the residual stream that is the next block's input, and writes
// every block's intermediates (LayerNorm outputs and statistics, qkv,
// attention probabilities, MLP hidden states) into ONE shared workspace.
// Backward of block i recomputes block i's forward from its kept input into
// that workspace, then runs the block's backward over it. The recompute
// happens INSIDE the PreBackward(1+i)/PostBackward(1+i) bracket, with the
// parameters PreBackward returns: at stage 3 that bracket already gathers
// the unit for the weight and input gradients, so the recompute costs no
// second all-gather (one gather per unit per backward, as without
// checkpointing), the hook order above is unchanged, and the engine's
// prefetch of unit i-1 still overlaps block i's (now longer) backward.
// Reopening a PreForward bracket for the recompute would gather every block
// twice in backward for no gain, since the parameters are needed anyway.
// The recompute stops before the block's last projection (its output is
// kept, and backward does not read it), so it costs about 2/3 of a block's
// forward matmuls plus its attention. Same kernels on the same inputs and
// parameters give the same bits, so gradients equal those without
// checkpointing bit for bit (tests/model/activation_checkpointing_test.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/model/model_config.h"
#include "worker/device/device.h"
#include "worker/device/device_buffer.h"
#include "worker/device/memory_accounting.h"
#include "worker/engine/unit_hooks.h"
#include "worker/model/causal_lm.h"
#include "worker/model/kernels.h"
#include "worker/model/model_layout.h"
#include "worker/model/model_runtime.h"

namespace zeroshard {

// Bytes of activations and backward scratch GptModel holds for a micro-batch
// of `batch` sequences of `seq_len` tokens (exact for this implementation).
// kNone: every block's intermediates and output; kBlocks: every block's
// output (B*T*C floats each, the next block's input) plus one block's
// intermediates, the recompute workspace, instead of every block's. Both
// include the embedding output, ln_f, logits, losses and backward scratch.
// (ModelActivationBytes, causal_lm.h, gives it for either family.)
int64_t GptActivationBytes(const ModelConfig& config, int batch, int seq_len,
                           ActivationCheckpointing mode);

class GptModel : public CausalLm {
 public:
  // `config` must pass ValidateModelConfig (checked). `mode`: what forward
  // keeps for backward ([Note: activation checkpointing]). `kernels` must
  // outlive the model and compute in `device`'s memory (CpuKernels: the
  // CPU; CudaKernels: its CUDA Device); null `device` = a CPU device the
  // model owns.
  explicit GptModel(const ModelConfig& config,
                    ActivationCheckpointing mode = ActivationCheckpointing::kNone,
                    Kernels& kernels = CpuKernels(), Device* device = nullptr);

  // The CausalLm calls (causal_lm.h), in the hook order above. Growing the
  // activations can fail (RESOURCE_EXHAUSTED) before any hook is called: on
  // one rank only, its peers then wait in their collectives until those
  // time out; the engine's fit check (EngineOptions::reserved_bytes)
  // reserves these bytes so it should not. The arena adds under 64 bytes
  // per buffer (alignment) and, off the CPU, 8 * B * T bytes of token ids
  // and one double to ActivationBytes(). set_device_wait: set it to the
  // job's collective timeout, since on a GPU the engine's collectives run on
  // the same stream and a hung peer shows here.
  absl::StatusOr<double> ForwardBackward(const int32_t* inputs, const int32_t* targets, int B,
                                         int T, float loss_scale, UnitHooks& hooks) override;
  absl::StatusOr<double> Forward(const int32_t* inputs, const int32_t* targets, int B, int T,
                                 UnitHooks& hooks) override;
  absl::Status Logits(const int32_t* inputs, int B, int T, UnitHooks& hooks,
                      std::vector<float>* logits) override;
  int64_t ActivationBytes() const override;
  void set_device_wait(absl::Duration wait) override { rt_.set_wait(wait); }
  const ModelConfig& config() const override { return config_; }
  ActivationCheckpointing mode() const { return mode_; }

 private:
  using BlockOffsets = GptLayout::Block;
  using Array = ModelArray;
  // One block's intermediates: what its backward reads besides its input.
  struct BlockActs {
    Array ln1, ln1_mean, ln1_rstd, qkv, att, atty, res2, ln2, ln2_mean, ln2_rstd, fch, fch_gelu;
  };
  struct Acts {
    int B = 0, T = 0;
    Array encoded, lnf, lnf_mean, lnf_rstd, logits, losses;
    // n_layer entries (kNone), or 1: the shared recompute workspace (kBlocks).
    std::vector<BlockActs> blocks;
    // Each block's output res3 (block l+1's input; the last feeds ln_f).
    std::vector<Array> outputs;
    // Backward scratch.
    Array dresidual, dln, dqkv, datty, dfch, dfch_gelu;
  };

  // Sets every array's size for a [B, T] micro-batch (pointers unset).
  static void Size(const ModelConfig& config, ActivationCheckpointing mode, int B, int T,
                   Acts& acts);
  // Every array of `acts`, in layout order.
  static std::vector<Array*> Arrays(Acts& acts);
  friend int64_t GptActivationBytes(const ModelConfig&, int, int, ActivationCheckpointing);

  absl::Status Validate(const int32_t* inputs, const int32_t* targets, int B, int T) const;
  // Lays every buffer of a [B, T] micro-batch out in the arena (grown as
  // needed).
  absl::Status Allocate(int B, int T);
  // Embedding, blocks, ln_f and the tied head: acts_.logits holds logits.
  void RunLogits(const int32_t* inputs, UnitHooks& hooks);
  // Logits, then the loss sum into the runtime's LossSum (read by FinishCall).
  void RunForward(const int32_t* inputs, const int32_t* targets, UnitHooks& hooks);
  void RunBackward(const int32_t* inputs, const int32_t* targets, float loss_scale,
                   UnitHooks& hooks);
  // Block `layer`'s intermediates from its input x into Work(layer); then
  // BlockOutput adds the last projection and the residual into
  // outputs[layer]. Backward's recompute runs only the first.
  void BlockIntermediates(int layer, const float* params, const float* x);
  void BlockOutput(int layer, const float* params);
  void BlockBackward(int layer, const UnitBackwardView& unit, const float* x);
  // Where block `layer`'s intermediates live (its own, or the workspace).
  BlockActs& Work(int layer);
  const float* BlockInput(int layer) const;

  ModelConfig config_;
  ActivationCheckpointing mode_;
  Kernels& k_;
  ModelRuntime rt_;                                    // Device, arena, tokens, the call's errors.
  int64_t wte_ = 0, wpe_ = 0, lnf_w_ = 0, lnf_b_ = 0;  // Offsets in unit 0.
  BlockOffsets block_{};                               // Same in every block unit.
  Acts acts_;
};

}  // namespace zeroshard
