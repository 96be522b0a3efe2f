// Incremental decoding for generation: each Append runs only the new tokens
// through the model, attending to a KV cache of the earlier positions
// (kv_cache.h), so a token's cost does not include recomputing the
// sequence. One implementation per family over the Kernels interface, with
// the formulas and parameter layouts of the training models: GptDecoder
// (gpt_model.h) and LlamaDecoder (llama_model.h). They run on the CPU or,
// given a CUDA Device and its kernels (model_kernels.h), on the GPU: the
// same code, with the parameters, the cache and the activations in the
// device's memory (ModelRuntime's arena) and the logits copied back.
//
// Not thread-safe: one generation per decoder.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/model/model_config.h"
#include "worker/device/device_buffer.h"
#include "worker/model/kv_cache.h"
#include "worker/model/model_runtime.h"

namespace zeroshard {

// Where a decoder runs.
struct DecodeTarget {
  Device* device = nullptr;    // Null: the CPU (a device of the decoder's own).
  Kernels* kernels = nullptr;  // For `device`; null: CpuKernels() (a CPU device only).
  int positions = 0;           // Positions the cache holds; 0 or above n_ctx: config.n_ctx.
};

class KvDecoder {
 public:
  virtual ~KvDecoder() = default;
  // Runs `tokens` at the next positions and writes the last one's logits
  // [vocab] to *logits. INVALID_ARGUMENT for no tokens, an id outside the
  // vocabulary, or past positions() (nothing runs then); a device error
  // (the position does not advance then).
  absl::Status Append(absl::Span<const int32_t> tokens, std::vector<float>* logits);
  int position() const { return pos_; }
  int positions() const { return cache_.positions(); }
  const ModelConfig& config() const { return config_; }

 protected:
  KvDecoder(const ModelConfig& config, const DecodeTarget& target, int kv_heads, int head_dim);
  // The family's own tables, placed with Place (after the units).
  virtual absl::Status PlaceTables() { return absl::OkStatus(); }
  // `host` where the kernels read it: itself on the CPU, else a copy in
  // `held`.
  absl::StatusOr<const float*> Place(const std::vector<float>& host, DeviceBuffer* held);
  // The family's pass over n new tokens (ids in host memory) at position
  // pos_: lays its arrays out in rt_ and sets *logits to the last token's
  // logits [vocab] in the device's memory.
  virtual absl::Status Run(const int32_t* tokens, int n, const float** logits) = 0;
  const float* unit(int i) const { return units_[i]; }

  const ModelConfig config_;
  ModelRuntime rt_;
  Kernels& k_;
  KvCache cache_;
  int pos_ = 0;

 private:
  friend absl::StatusOr<std::unique_ptr<KvDecoder>> CreateKvDecoder(
      const ModelConfig&, const std::vector<std::vector<float>>&, const DecodeTarget&);
  // Places the units (in place on the CPU, copied to another device) and
  // the family's tables and allocates the cache; a device's allocation or
  // copy error.
  absl::Status Setup(const std::vector<std::vector<float>>& units);

  std::vector<const float*> units_;  // Each unit's parameters where the kernels read them.
  std::vector<DeviceBuffer> placed_;
};

// The decoder of `config`'s family. `units`: every unit's full fp32
// parameters in host memory (ModelUnits(config)'s layout, as LocalParams
// holds them); on the CPU they must outlive the decoder. Errors: Setup's,
// INVALID_ARGUMENT for a device without kernels.
absl::StatusOr<std::unique_ptr<KvDecoder>> CreateKvDecoder(
    const ModelConfig& config, const std::vector<std::vector<float>>& units,
    const DecodeTarget& target = {});

}  // namespace zeroshard
