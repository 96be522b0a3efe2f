// A tiny MLP for engine tests, written against UnitHooks only, with a
// hand-written forward and backward, and an independent unsharded fp32
// reference (plain holder + AdamW in double written here, not worker/optim).
//
// Model (D inputs, H hidden; three units):
//   unit 0 "embed": W1 [H, D], b1 [H]   (used twice: tied input/output)
//   unit 1 "hidden": W2 [H, H], b2 [H]
//   unit 2 "bias": c [D]                 (D = 3: fewer elements than N = 4)
//   h1 = tanh(W1 x + b1); h2 = tanh(W2 h1 + b2); y = W1^T h2 + c
//   loss = mean over the batch of 0.5 * |y - t|^2
// Forward brackets: 0, 1, 0, 2; backward: 2, 0, 1, 0 (unit 0 twice per pass).
#pragma once

#include <cstdint>
#include <vector>

#include "common/shard_plan.h"
#include "worker/engine/unit_hooks.h"

namespace zeroshard::testing {

struct MlpDims {
  int d = 3;
  int h = 7;
};

std::vector<UnitSpec> MlpUnits(const MlpDims& dims);
// Deterministic initial values, one vector per unit (numel elements).
std::vector<std::vector<float>> MlpInit(const ShardPlan& plan, uint32_t seed);

struct Sample {
  std::vector<float> x, t;
};
// Sample `index` of global step `step`: depends on nothing else, so every
// world size sees the same global batch.
Sample MakeSample(const MlpDims& dims, int step, int index);

// Runs forward and backward over `batch` through the hooks: the model adds
// d(mean loss over batch)/d(params) into the gradient views. Returns the loss.
double MlpForwardBackward(const MlpDims& dims, const ShardPlan& plan, UnitHooks& hooks,
                          const std::vector<Sample>& batch);

struct RefAdamW {
  double lr = 1e-2, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.01;
  double max_grad_norm = 0.05;
};

// The unsharded reference: `steps` steps, each on the global batch of
// `global_batch` samples; clipping as torch.nn.utils.clip_grad_norm_
// (coef = min(1, max / (norm + 1e-6))), then AdamW (Loshchilov & Hutter) in
// double. Returns final params per unit; `norms` and `clip_coefs` (optional)
// get each step's gradient norm and clip coefficient (clipping active?).
std::vector<std::vector<float>> ReferenceTrain(const MlpDims& dims, const ShardPlan& plan,
                                               const RefAdamW& hp, int steps, int global_batch,
                                               std::vector<double>* norms = nullptr,
                                               std::vector<double>* clip_coefs = nullptr);

}  // namespace zeroshard::testing
