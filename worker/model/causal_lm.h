// What a trainer, a reference or a tool needs of a decoder-only language
// model, whichever family computes it (common/model/model_config.h): GptModel
// (gpt2) or LlamaModel (llama). Models own no parameters: they ask UnitHooks
// for each unit around every use and ADD gradients into what PreBackward
// returns (worker/engine/unit_hooks.h); each family documents its hook
// order. Activations are the model's own memory on its Device.
// Not thread-safe: one training thread per model.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/model/model_config.h"
#include "worker/device/device.h"
#include "worker/engine/unit_hooks.h"
#include "worker/model/kernels.h"

namespace zeroshard {

class CausalLm {
 public:
  virtual ~CausalLm() = default;

  // Forward and backward over B sequences of T tokens. inputs and targets
  // are int32 [B, T] row-major (host memory) with values in [0, vocab), or,
  // for targets, kIgnoreTarget (kernel_constants.h: not counted);
  // 1 <= T <= n_ctx. Gradients of loss_scale * (sum over all B*T tokens of
  // the cross-entropy, in nats) are ADDED through the hooks. Returns that
  // sum (unscaled) once the device has finished the call's work.
  // INVALID_ARGUMENT naming the field for bad sizes, null pointers or
  // out-of-range tokens (nothing is called on the hooks then); the device's
  // or the kernels' first error; RESOURCE_EXHAUSTED if the activations
  // cannot grow.
  virtual absl::StatusOr<double> ForwardBackward(const int32_t* inputs, const int32_t* targets,
                                                 int B, int T, float loss_scale,
                                                 UnitHooks& hooks) = 0;
  // Evaluation: forward only; the sum of per-token losses. Errors as above.
  virtual absl::StatusOr<double> Forward(const int32_t* inputs, const int32_t* targets, int B,
                                         int T, UnitHooks& hooks) = 0;
  // Inference: the LM head's logits (before softmax) as fp32 [B, T, vocab]
  // row-major into `logits` (resized). Errors as Forward (inputs only).
  virtual absl::Status Logits(const int32_t* inputs, int B, int T, UnitHooks& hooks,
                              std::vector<float>* logits) = 0;
  // Bytes of activation and scratch buffers in use; equals
  // ModelActivationBytes(config(), B, T, mode) for the last call's B, T.
  virtual int64_t ActivationBytes() const = 0;
  // How long a call waits for its device work at the end (default 10 min).
  virtual void set_device_wait(absl::Duration wait) = 0;
  virtual const ModelConfig& config() const = 0;
};

// The model of `config`'s family. `config` must pass ValidateModelConfig
// (checked); `kernels` must outlive the model and compute in `device`'s
// memory; null `device` = a CPU device the model owns.
std::unique_ptr<CausalLm> CreateCausalLm(
    const ModelConfig& config, ActivationCheckpointing mode = ActivationCheckpointing::kNone,
    Kernels& kernels = CpuKernels(), Device* device = nullptr);

// Bytes of activations and backward scratch the model of `config`'s family
// holds for a micro-batch of `batch` sequences of `seq_len` tokens (exact).
int64_t ModelActivationBytes(const ModelConfig& config, int batch, int seq_len,
                             ActivationCheckpointing mode = ActivationCheckpointing::kNone);

}  // namespace zeroshard
