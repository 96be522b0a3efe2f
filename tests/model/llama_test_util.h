// Shared by the LlamaModel tests: odd llama-family configurations (STYLE.md
// point 15) and random weights that make every parameter matter.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/model/model_config.h"
#include "common/shard_plan.h"
#include "worker/model/model_init.h"

namespace zeroshard::llama_test {

// vocab 37, 3 layers, width 24, 6 query heads, n_inner 29, n_ctx 11: no
// size is a power of two or a multiple of another by accident.
inline ModelConfig OddBase() {
  ModelConfig c;
  c.family = ModelFamily::kLlama;
  c.vocab = 37;
  c.n_layer = 3;
  c.n_embd = 24;
  c.n_head = 6;
  c.n_ctx = 11;
  c.n_inner = 29;
  c.norm_eps = 1e-5;
  return c;
}

// 3 kv heads of 6 (NH D = 36 != C), untied, every bias, llama3 rope
// scaling where all three of its cases occur: at D = 6 and theta 1e4 the
// wavelengths are 6.3, 135 and 2921 positions, against 256 / 4 = 64 (kept
// below) and 256 (divided above; blended between).
inline ModelConfig GqaUntiedBiases() {
  ModelConfig c = OddBase();
  c.n_kv_head = 3;
  c.head_dim = 6;
  c.tied = false;
  c.qkv_bias = c.o_bias = true;
  c.rope_scaling = {.type = "llama3",
                    .factor = 4.0,
                    .low_freq_factor = 1.0,
                    .high_freq_factor = 4.0,
                    .original_max_positions = 256};
  return c;
}

// Qwen3-like: 2 kv heads, explicit head_dim 10 (NH D = 60), QK-norm, tied,
// q/k/v bias without o bias.
inline ModelConfig QkNormTied() {
  ModelConfig c = OddBase();
  c.n_kv_head = 2;
  c.head_dim = 10;
  c.qk_norm = true;
  c.tied = true;
  c.qkv_bias = true;
  c.rope_theta = 500.0;
  return c;
}

// Plain Llama: head_dim from C / NH (4), 2 kv heads, untied, no biases.
inline ModelConfig PlainUntied() {
  ModelConfig c = OddBase();
  c.n_kv_head = 2;
  c.tied = false;
  return c;
}

inline std::vector<std::pair<std::string, ModelConfig>> OddConfigs() {
  return {{"gqa_untied_biases", GqaUntiedBiases()},
          {"qk_norm_tied", QkNormTied()},
          {"plain_untied", PlainUntied()}};
}

// InitUnits, then weights scaled to sd 0.2 (logits far from uniform), norm
// weights 1 + N(0, 0.2) and biases N(0, 0.1): with InitUnits' ones and
// zeros a wrong norm or bias gradient could hide behind symmetry.
inline std::vector<std::vector<float>> RandomUnits(const ModelConfig& c, uint64_t seed) {
  std::vector<std::vector<float>> units = InitUnits(c, seed);
  const ShardPlan plan = *MakeShardPlan(ModelUnits(c), 1, 1);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t u = 0; u < units.size(); ++u) {
    for (const ParamPlacement& p : plan.units[u].params) {
      float* v = units[u].data() + p.offset;
      const bool bias = p.name.size() > 4 && p.name.substr(p.name.size() - 4) == "bias";
      for (int64_t i = 0; i < p.numel; ++i) {
        if (bias) {
          v[i] = 0.1f * normal(rng);
        } else if (p.shape.size() == 1) {
          v[i] += 0.2f * normal(rng);
        } else {
          v[i] *= 10.0f;
        }
      }
    }
  }
  return units;
}

inline std::vector<int32_t> Tokens(int64_t n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, vocab - 1);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t& x : t) x = d(rng);
  return t;
}

}  // namespace zeroshard::llama_test
