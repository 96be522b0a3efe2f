// TokenSampler (worker/model/token_sampler.h): greedy is the argmax (lowest
// id among ties); top_k = 1 and a tiny top_p are greedy at any temperature;
// the same seed repeats its draws; draws follow the softmax at the
// temperature (a frequency check over many draws).
#include "worker/model/token_sampler.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(TokenSampler, GreedyAndItsEquivalents) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f};
  EXPECT_EQ(TokenSampler({.temperature = 0}).Next(logits), 1);
  for (uint64_t seed = 0; seed < 20; ++seed) {
    EXPECT_EQ(TokenSampler({.temperature = 3.0, .top_k = 1, .seed = seed}).Next(logits), 1);
    EXPECT_EQ(TokenSampler({.temperature = 0.5, .top_p = 1e-6, .seed = seed}).Next(logits), 1);
  }
}

TEST(TokenSampler, SeededDrawsRepeatAndFollowTheSoftmax) {
  const std::vector<float> logits = {1.0f, 0.0f, 2.0f};
  const SamplingOptions o{.temperature = 2.0, .seed = 11};
  TokenSampler a(o), b(o);
  std::vector<int> counts(3, 0);
  constexpr int kDraws = 20000;
  for (int i = 0; i < kDraws; ++i) {
    const int32_t x = a.Next(logits);
    ASSERT_EQ(x, b.Next(logits)) << "draw " << i;
    ++counts[x];
  }
  double z = 0;
  for (float l : logits) z += std::exp(l / 2.0);
  for (int v = 0; v < 3; ++v) {
    EXPECT_NEAR(counts[v] / double{kDraws}, std::exp(logits[v] / 2.0) / z, 0.015) << v;
  }
  // top_k = 2 never draws the least likely id.
  TokenSampler k({.temperature = 2.0, .top_k = 2, .seed = 3});
  for (int i = 0; i < 2000; ++i) EXPECT_NE(k.Next(logits), 1);
}

}  // namespace
}  // namespace zeroshard
