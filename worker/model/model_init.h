// Deterministic random initialisation of a model's units (`--init random`,
// and every preset): linear and embedding weights normal(0, 0.02); gpt2's
// two residual projections per block (attn.proj, mlp.proj) normal(0, 0.02 /
// sqrt(2 * n_layer)) (Radford et al., 2019, section 2.3); norm weights 1;
// biases and LayerNorm beta 0. The llama family follows HF's
// _init_weights (initializer_range 0.02, no residual scaling).
// Thread-safe: a pure function.
#pragma once

#include <cstdint>
#include <vector>

#include "common/model/model_config.h"

namespace zeroshard {

// One full fp32 buffer per unit (numel elements, plan layout at world size
// 1). Same (config, seed) -> same bits on any machine.
std::vector<std::vector<float>> InitUnits(const ModelConfig& config, uint64_t seed);
// Unit `unit` of InitUnits alone (the same bits), in `plan`, the model's
// world-size-1 plan.
std::vector<float> InitUnit(const ModelConfig& config, const UnitPlan& unit, int index,
                            uint64_t seed);

}  // namespace zeroshard
