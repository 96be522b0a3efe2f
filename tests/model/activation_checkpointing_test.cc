// Activation checkpointing in GptModel ([Note: activation checkpointing] in
// worker/model/gpt_model.h): with kBlocks the loss, the logits and every
// gradient equal kNone's bit for bit in fp32 (the recompute runs the same
// kernels on the same inputs), through LocalParams, the contract-checking
// unsharded hooks, with the very same hook call sequence; the activation
// bytes the model holds equal ModelActivationBytes in both modes; and the
// medium preset's activation memory falls by at least (L-1)/L of its block
// activations. (kNone itself is checked against NumPy in gpt_reference_test;
// through the sharded engine: tests/engine/engine_checkpointing_test.)
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/model/model_config.h"
#include "gtest/gtest.h"
#include "worker/model/gpt_model.h"
#include "worker/model/local_params.h"
#include "worker/model/model_init.h"

namespace zeroshard {
namespace {

constexpr ActivationCheckpointing kNone = ActivationCheckpointing::kNone;
constexpr ActivationCheckpointing kBlocks = ActivationCheckpointing::kBlocks;

std::vector<int32_t> Tokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % 256);
  return t;
}

// LocalParams that also records every hook call as "F3", "f3", "B3", "b3"
// (Pre/Post Forward/Backward of unit 3).
class RecordingParams : public LocalParams {
 public:
  using LocalParams::LocalParams;
  const float* PreForward(int u) override {
    Log("F", u);
    return LocalParams::PreForward(u);
  }
  void PostForward(int u) override {
    Log("f", u);
    LocalParams::PostForward(u);
  }
  UnitBackwardView PreBackward(int u) override {
    Log("B", u);
    return LocalParams::PreBackward(u);
  }
  void PostBackward(int u) override {
    Log("b", u);
    LocalParams::PostBackward(u);
  }
  std::vector<std::string> calls;

 private:
  void Log(const char* kind, int u) { calls.push_back(kind + std::to_string(u)); }
};

struct Outcome {
  std::vector<double> losses;
  std::vector<std::vector<float>> grads;
  std::vector<std::string> calls;
  int64_t activation_bytes = 0;
};

// Two ForwardBackward calls (different micro-batch sizes, so the workspace
// is reused at a new shape), gradients accumulating, then one Forward.
Outcome Run(const ModelConfig& c, ActivationCheckpointing mode, int B, int T, float scale) {
  RecordingParams hooks(InitUnits(c, 11));
  GptModel model(c, mode);
  const auto x = Tokens(2 * B * T, 3), y = Tokens(2 * B * T, 4);
  Outcome out;
  out.losses.push_back(*model.ForwardBackward(x.data(), y.data(), 2 * B, T, scale, hooks));
  out.losses.push_back(*model.ForwardBackward(x.data(), y.data(), B, T, scale, hooks));
  out.activation_bytes = model.ActivationBytes();
  out.losses.push_back(*model.Forward(x.data() + B * T, y.data() + B * T, B, T, hooks));
  for (int u = 0; u < hooks.num_units(); ++u) out.grads.push_back(hooks.grads(u));
  out.calls = hooks.calls;
  return out;
}

void ExpectBitEqual(const ModelConfig& c, int B, int T) {
  const Outcome none = Run(c, kNone, B, T, 0.3f), blocks = Run(c, kBlocks, B, T, 0.3f);
  EXPECT_EQ(blocks.calls, none.calls);  // Same brackets, same order.
  for (size_t i = 0; i < none.losses.size(); ++i) {
    EXPECT_EQ(std::memcmp(&none.losses[i], &blocks.losses[i], sizeof(double)), 0)
        << "loss " << i << ": " << none.losses[i] << " vs " << blocks.losses[i];
  }
  ASSERT_EQ(blocks.grads.size(), none.grads.size());
  for (size_t u = 0; u < none.grads.size(); ++u) {
    const std::vector<float>& a = none.grads[u];
    const std::vector<float>& b = blocks.grads[u];
    ASSERT_EQ(a.size(), b.size());
    int nonzero = 0;
    for (float g : a) nonzero += g != 0.0f;
    EXPECT_GT(nonzero, 0) << "unit " << u << " has no gradient: the test would prove nothing";
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0)
          << "unit " << u << " element " << i << ": " << a[i] << " vs " << b[i];
    }
  }
  // Not the same path twice: kBlocks holds less.
  if (c.n_layer > 1) {
    EXPECT_LT(blocks.activation_bytes, none.activation_bytes);
  }
}

TEST(ActivationCheckpointingTest, GradientsBitEqualTinyPreset) {
  ExpectBitEqual(*ModelPreset("tiny"), 2, 16);
}

TEST(ActivationCheckpointingTest, GradientsBitEqualOddShape) {
  // 3 layers, width 24, 3 heads (head size 8), T = 7 < n_ctx, B = 3.
  ExpectBitEqual(Gpt2Config(256, 3, 24, 3, 9), 3, 7);
}

TEST(ActivationCheckpointingTest, LogitsEqual) {
  const ModelConfig c = Gpt2Config(256, 3, 24, 3, 9);
  LocalParams hooks(InitUnits(c, 5));
  GptModel none(c, kNone), blocks(c, kBlocks);
  const auto x = Tokens(2 * 9, 8);
  std::vector<float> a, b;
  ASSERT_TRUE(none.Logits(x.data(), 2, 9, hooks, &a).ok());
  ASSERT_TRUE(blocks.Logits(x.data(), 2, 9, hooks, &b).ok());
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

// The per-block intermediates, counted by hand from the block's dataflow
// (gpt_model_passes.cc): ln1, atty, res2, ln2 [B,T,C]; the two LayerNorms'
// mean and rstd [B,T]; qkv [B,T,3C]; attention probabilities [B,NH,T,T];
// fch and fch_gelu [B,T,4C]; fp32. These are what kNone keeps for every
// block and kBlocks recomputes ("block activations"); each block's output
// [B,T,C] is kept in both modes and is not among them.
int64_t BlockActivationBytes(const ModelConfig& c, int B, int T) {
  const int64_t bt = int64_t{B} * T, C = c.n_embd;
  return 4 * (4 * bt * C + 4 * bt + 3 * bt * C + int64_t{B} * c.n_head * T * T + 8 * bt * C);
}

TEST(ActivationCheckpointingTest, ActivationBytesMatchTheFormula) {
  for (const ModelConfig& c : {*ModelPreset("tiny"), Gpt2Config(256, 3, 24, 3, 9)}) {
    for (auto [B, T] : {std::pair{1, 1}, std::pair{3, 7}, std::pair{2, 9}, std::pair{5, 4}}) {
      if (T > c.n_ctx) continue;
      const auto x = Tokens(B * T, 1), y = Tokens(B * T, 2);
      for (ActivationCheckpointing mode : {kNone, kBlocks}) {
        LocalParams hooks(InitUnits(c, 1));
        GptModel model(c, mode);
        ASSERT_TRUE(model.ForwardBackward(x.data(), y.data(), B, T, 1.0f, hooks).ok());
        EXPECT_EQ(model.ActivationBytes(), ModelActivationBytes(c, B, T, mode))
            << ActivationCheckpointingName(mode) << " B=" << B << " T=" << T;
      }
      // kBlocks keeps one block's intermediates instead of n_layer's.
      EXPECT_EQ(ModelActivationBytes(c, B, T, kNone) - ModelActivationBytes(c, B, T, kBlocks),
                (c.n_layer - 1) * BlockActivationBytes(c, B, T))
          << "B=" << B << " T=" << T;
    }
  }
}

TEST(ActivationCheckpointingTest, MediumPresetSavesAllButOneBlocksActivations) {
  const ModelConfig c = *ModelPreset("medium");
  const int B = 1, T = c.n_ctx;
  const int64_t none = ModelActivationBytes(c, B, T, kNone);
  const int64_t blocks = ModelActivationBytes(c, B, T, kBlocks);
  const int64_t block_acts = c.n_layer * BlockActivationBytes(c, B, T);
  std::printf(
      "medium (L=%d, C=%d, T=%d, B=1): activations none %.2f MiB, blocks %.2f MiB; "
      "block activations %.2f MiB\n",
      c.n_layer, c.n_embd, T, none / 1048576.0, blocks / 1048576.0, block_acts / 1048576.0);
  ASSERT_GT(c.n_layer, 1);
  // Falls by at least (L-1)/L of the block activations.
  EXPECT_GE((none - blocks) * c.n_layer, (c.n_layer - 1) * block_acts);
}

}  // namespace
}  // namespace zeroshard
