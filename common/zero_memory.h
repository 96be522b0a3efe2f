// Model-state bytes per rank by kind, and what the ZeRO paper says they
// should be (Rajbhandari et al., SC'20, section 5.1 and Figure 1; the table in
// shared/DESIGN.md "Step at each stage").
//
// With Ψ parameters, N ranks, c bytes per compute-copy element, g bytes per
// gradient element and K = 12 bytes of fp32 optimizer state per parameter
// (master weights, Adam m and v):
//   stage 0: params cΨ,   grads gΨ,   optimizer KΨ
//   stage 1: params cΨ,   grads gΨ,   optimizer KΨ/N
//   stage 2: params cΨ,   grads gΨ/N, optimizer KΨ/N
//   stage 3: params cΨ/N, grads gΨ/N, optimizer KΨ/N   (+ gather buffers)
// Buffers (gather/scatter staging) are not part of the formula.
// Thread-safe: pure functions over values.
#pragma once

#include <cstdint>

namespace zeroshard {

struct MemoryByKind {
  int64_t params = 0;     // Compute-copy parameters.
  int64_t grads = 0;      // Gradients.
  int64_t optimizer = 0;  // fp32 master weights + AdamW moments.
  int64_t buffers = 0;    // Gather/scatter staging buffers.
  // Peer redundancy (--redundancy 1): host memory holding this rank's last
  // committed optimizer shard and its ring neighbour's. Not in total(),
  // which is the device-side state.
  int64_t redundancy = 0;
  // Optimizer state moved out of device memory by --offload-optimizer (host
  // memory or NVMe files) and, with --offload-params nvme, the stage-3
  // parameter shards on NVMe. Not in total(); the staging buffers that
  // stream it are counted under optimizer / params.
  int64_t offloaded = 0;
  // The model's activations and backward scratch (GptModel::ActivationBytes;
  // memory of the device the model computes on). Reported beside the
  // engine's kinds; not in model_state() or total(), which are the
  // engine's. 0 in the ZeRO formula.
  int64_t activations = 0;
  int64_t model_state() const { return params + grads + optimizer; }
  int64_t total() const { return model_state() + buffers; }
};

inline constexpr int64_t kAdamStateBytesPerParam = 12;  // K in the paper.

// The formula above, in bytes (fractions rounded up). buffers = 0.
MemoryByKind ZeroFormulaBytes(int stage, int64_t num_params, int world_size, int compute_bytes,
                              int grad_bytes);

}  // namespace zeroshard
