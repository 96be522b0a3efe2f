// The next token from a model's logits: greedy (temperature 0), or sampled
// at a temperature from the top k tokens and the smallest set whose
// probability reaches top_p (nucleus sampling: Holtzman et al., 2020, "The
// Curious Case of Neural Text Degeneration", section 3.1), in that order,
// as transformers' generate applies its warpers. Seeded: the same seed and
// logits give the same tokens.
//
// Thread safety: one sampler per thread.
#pragma once

#include <cstdint>
#include <random>

#include "absl/types/span.h"

namespace zeroshard {

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy (argmax, lowest id among ties).
  int top_k = 0;             // 0: no limit.
  double top_p = 1.0;        // 1: no limit.
  uint64_t seed = 0;
};

class TokenSampler {
 public:
  explicit TokenSampler(const SamplingOptions& o) : o_(o), rng_(o.seed) {}
  // The chosen id among logits [vocab].
  int32_t Next(absl::Span<const float> logits);

 private:
  SamplingOptions o_;
  std::mt19937_64 rng_;
};

}  // namespace zeroshard
