// Rotary embedding tables (Su et al., 2021, RoFormer, section 3.4) as
// Hugging Face computes them, so zeroshard's rotations match transformers'
// to float rounding: inverse frequencies theta^(-2i/D) in fp32
// (_compute_default_rope_parameters), optionally rescaled by Llama 3.1's
// rule (_compute_llama3_parameters: wavelengths past
// original_max_positions / low_freq_factor divided by `factor`, those under
// original_max_positions / high_freq_factor kept, a linear blend between),
// then angle = fp32(t) * inv_freq in fp32 and cos/sin of that angle.
// Thread-safe: pure functions.
#pragma once

#include <vector>

#include "common/model/model_config.h"

namespace zeroshard {

// D/2 inverse frequencies (radians per position) of `config` (llama family).
std::vector<float> RopeInverseFrequencies(const ModelConfig& config);

struct RopeTables {
  std::vector<float> cos, sin;  // [positions, D/2] row-major each.
};

// Tables for positions 0 .. positions-1.
RopeTables MakeRopeTables(const ModelConfig& config, int positions);

}  // namespace zeroshard
