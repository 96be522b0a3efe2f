// LlamaModel's own contracts on odd configurations (llama_test_util.h),
// what tests/model/hf_llama_test.py (numerics against transformers) does
// not reach: activation bytes equal the planner's figure; activation
// checkpointing changes no bit; the hook sequence is the planner's
// ModelBrackets; the chunked head ([Note: chunked head]) equals one chunk;
// the loss is the cross-entropy of the model's own logits, computed here in
// double; bad input is refused before any hook runs.
#include "worker/model/llama_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/model/llama_test_util.h"
#include "worker/model/causal_lm.h"
#include "worker/model/local_params.h"
#include "worker/model/model_plan.h"

namespace zeroshard::llama_test {
namespace {

constexpr ActivationCheckpointing kNone = ActivationCheckpointing::kNone;
constexpr ActivationCheckpointing kBlocks = ActivationCheckpointing::kBlocks;

// LocalParams (which checks the bracket contract) recording each call as
// "F3"/"f3" (Pre/PostForward of unit 3) or "B3"/"b3" (backward).
class RecordingParams : public LocalParams {
 public:
  using LocalParams::LocalParams;
  const float* PreForward(int u) override {
    calls.push_back("F" + std::to_string(u));
    return LocalParams::PreForward(u);
  }
  void PostForward(int u) override {
    calls.push_back("f" + std::to_string(u));
    LocalParams::PostForward(u);
  }
  UnitBackwardView PreBackward(int u) override {
    calls.push_back("B" + std::to_string(u));
    return LocalParams::PreBackward(u);
  }
  void PostBackward(int u) override {
    calls.push_back("b" + std::to_string(u));
    LocalParams::PostBackward(u);
  }
  std::vector<std::string> calls;
};

// The calls a list of brackets means: each Pre immediately closed by its Post.
std::vector<std::string> Calls(const std::vector<UnitBracket>& brackets) {
  std::vector<std::string> out;
  for (const UnitBracket& b : brackets) {
    const std::string u = std::to_string(b.unit);
    out.push_back((b.backward ? "B" : "F") + u);
    out.push_back((b.backward ? "b" : "f") + u);
  }
  return out;
}

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

float MaxAbs(const std::vector<float>& v) {
  float m = 0.0f;
  for (float x : v) m = std::max(m, std::abs(x));
  return m;
}

TEST(LlamaModelTest, ActivationBytesAreThePlannersFigure) {
  for (const auto& [name, c] : OddConfigs()) {
    for (ActivationCheckpointing mode : {kNone, kBlocks}) {
      LlamaModel model(c, mode);
      LocalParams hooks(RandomUnits(c, 1));
      // Growing, then shrinking: the figure follows the last call.
      for (auto [B, T] : {std::pair{2, 11}, std::pair{3, 5}}) {
        const auto x = Tokens(B * T, c.vocab, 2), y = Tokens(B * T, c.vocab, 3);
        ASSERT_TRUE(model.ForwardBackward(x.data(), y.data(), B, T, 1.0f, hooks).ok());
        EXPECT_EQ(model.ActivationBytes(), ModelActivationBytes(c, B, T, mode))
            << name << " " << ActivationCheckpointingName(mode) << " B=" << B << " T=" << T;
      }
    }
    // Recomputing blocks must hold less when there is more than one block.
    EXPECT_LT(ModelActivationBytes(c, 2, 11, kBlocks), ModelActivationBytes(c, 2, 11, kNone));
  }
}

struct Outcome {
  std::vector<double> losses;
  std::vector<std::vector<float>> grads;
  std::vector<float> logits;
  std::vector<std::string> calls;
};

// Two ForwardBackward calls (the second smaller: buffers reused at a new
// shape), gradients accumulating, then Forward and Logits.
Outcome RunAll(const ModelConfig& c, ActivationCheckpointing mode) {
  RecordingParams hooks(RandomUnits(c, 5));
  LlamaModel model(c, mode);
  const int B = 2, T = 9;
  const auto x = Tokens(2 * B * T, c.vocab, 6), y = Tokens(2 * B * T, c.vocab, 7);
  Outcome out;
  out.losses.push_back(*model.ForwardBackward(x.data(), y.data(), 2 * B, T, 0.3f, hooks));
  out.losses.push_back(*model.ForwardBackward(x.data(), y.data(), B, T - 2, 0.7f, hooks));
  out.losses.push_back(*model.Forward(x.data(), y.data(), B, T, hooks));
  EXPECT_TRUE(model.Logits(x.data(), B, T, hooks, &out.logits).ok());
  for (int u = 0; u < hooks.num_units(); ++u) out.grads.push_back(hooks.grads(u));
  out.calls = hooks.calls;
  return out;
}

// The recompute runs the same kernels on the same inputs: every bit equal.
TEST(LlamaModelTest, CheckpointingBlocksChangesNoBit) {
  for (const auto& [name, c] : OddConfigs()) {
    const Outcome none = RunAll(c, kNone), blocks = RunAll(c, kBlocks);
    EXPECT_EQ(blocks.calls, none.calls) << name;
    for (size_t i = 0; i < none.losses.size(); ++i) {
      EXPECT_EQ(std::memcmp(&none.losses[i], &blocks.losses[i], sizeof(double)), 0)
          << name << " loss " << i << ": " << none.losses[i] << " vs " << blocks.losses[i];
    }
    EXPECT_TRUE(BitEqual(none.logits, blocks.logits)) << name;
    ASSERT_EQ(none.grads.size(), blocks.grads.size());
    for (size_t u = 0; u < none.grads.size(); ++u) {
      EXPECT_GT(MaxAbs(none.grads[u]), 0.0f) << name << " unit " << u << ": proves nothing";
      EXPECT_TRUE(BitEqual(none.grads[u], blocks.grads[u])) << name << " unit " << u;
    }
  }
}

// The planner prices gathers from ModelBrackets; the model must make
// exactly those calls, or the traffic and memory plans are wrong.
TEST(LlamaModelTest, HookCallsAreModelBrackets) {
  for (const auto& [name, c] : OddConfigs()) {
    std::vector<UnitBracket> forward;
    for (int u = 0; u <= c.n_layer; ++u) forward.push_back({u, false});
    forward.push_back({c.head_unit(), false});
    for (ActivationCheckpointing mode : {kNone, kBlocks}) {
      LlamaModel model(c, mode);
      const auto x = Tokens(3 * 4, c.vocab, 1), y = Tokens(3 * 4, c.vocab, 2);
      RecordingParams fb(RandomUnits(c, 1)), fwd(RandomUnits(c, 1)), lg(RandomUnits(c, 1));
      ASSERT_TRUE(model.ForwardBackward(x.data(), y.data(), 3, 4, 1.0f, fb).ok());
      ASSERT_TRUE(model.Forward(x.data(), y.data(), 3, 4, fwd).ok());
      std::vector<float> logits;
      ASSERT_TRUE(model.Logits(x.data(), 3, 4, lg, &logits).ok());
      const char* m = ActivationCheckpointingName(mode);
      EXPECT_EQ(fb.calls, Calls(ModelBrackets(c, mode))) << name << " " << m;
      EXPECT_EQ(fwd.calls, Calls(forward)) << name << " " << m;
      EXPECT_EQ(lg.calls, Calls(forward)) << name << " " << m;
    }
  }
}

// max |got - want| / max |want|, the measure of the tolerances below.
double Deviation(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double err = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::abs(double{got[i]} - double{want[i]}));
  }
  return err / std::max(double{MaxAbs(want)}, 1e-30);
}

// One head chunk (all 20 rows) against chunks of 1, 3 and 7 rows (the last
// chunk short for 3 and 7). Not bit-equal: sgemm picks its blocking by the
// row count M, so a row's dot products round differently at M = 1 and M =
// 20 (measured: a few ulp, 2e-7 of the largest logit). Loss, logits and every
// gradient within 1e-6.
TEST(LlamaModelTest, HeadInChunksEqualsOneChunk) {
  const int B = 2, T = 10;
  for (const auto& [name, c] : OddConfigs()) {
    const auto x = Tokens(B * T, c.vocab, 8), y = Tokens(B * T, c.vocab, 9);
    LocalParams whole(RandomUnits(c, 3));
    LlamaModel one(c, kNone, CpuKernels(), nullptr, B * T);
    const double want = *one.ForwardBackward(x.data(), y.data(), B, T, 0.5f, whole);
    std::vector<float> want_logits;
    ASSERT_TRUE(one.Logits(x.data(), B, T, whole, &want_logits).ok());
    for (int chunk : {1, 3, 7}) {
      LocalParams parts(RandomUnits(c, 3));
      LlamaModel model(c, kNone, CpuKernels(), nullptr, chunk);
      ASSERT_EQ(model.head_chunk_tokens(), chunk);
      const double got = *model.ForwardBackward(x.data(), y.data(), B, T, 0.5f, parts);
      EXPECT_NEAR(got, want, 1e-6 * want) << name << " chunk " << chunk;
      std::vector<float> logits;
      ASSERT_TRUE(model.Logits(x.data(), B, T, parts, &logits).ok());
      EXPECT_LE(Deviation(logits, want_logits), 1e-6) << name << " chunk " << chunk;
      for (int u = 0; u < whole.num_units(); ++u) {
        ASSERT_GT(MaxAbs(whole.grads(u)), 0.0f) << name << " unit " << u;
        EXPECT_LE(Deviation(parts.grads(u), whole.grads(u)), 1e-6)
            << name << " chunk " << chunk << " unit " << u;
      }
    }
  }
}

// Sum over rows of log-sum-exp(row) - row[target], in double.
double CrossEntropy(const std::vector<float>& logits, const std::vector<int32_t>& targets, int V) {
  double total = 0.0;
  for (size_t n = 0; n < targets.size(); ++n) {
    const float* row = logits.data() + n * V;
    const double mx = *std::max_element(row, row + V);
    double sum = 0.0;
    for (int v = 0; v < V; ++v) sum += std::exp(double{row[v]} - mx);
    total += mx + std::log(sum) - row[targets[n]];
  }
  return total;
}

// The loss is what the logits say it is, independently of the fused
// softmax-cross-entropy kernel and the chunked head (chunks of 4 rows here).
TEST(LlamaModelTest, LossIsTheCrossEntropyOfTheLogits) {
  const int B = 3, T = 7;
  for (const auto& [name, c] : OddConfigs()) {
    LocalParams hooks(RandomUnits(c, 4));
    LlamaModel model(c, kNone, CpuKernels(), nullptr, 4);
    const auto x = Tokens(B * T, c.vocab, 10), y = Tokens(B * T, c.vocab, 11);
    std::vector<float> logits;
    ASSERT_TRUE(model.Logits(x.data(), B, T, hooks, &logits).ok());
    ASSERT_EQ(logits.size(), static_cast<size_t>(B * T * c.vocab));
    const double want = CrossEntropy(logits, y, c.vocab);
    EXPECT_NEAR(*model.Forward(x.data(), y.data(), B, T, hooks), want, 1e-5 * want) << name;
    EXPECT_NEAR(*model.ForwardBackward(x.data(), y.data(), B, T, 1.0f, hooks), want, 1e-5 * want)
        << name;
    // Far from uniform: a loss of V ln V-ish would not tell logits apart.
    EXPECT_GT(std::abs(want / (B * T) - std::log(static_cast<double>(c.vocab))), 0.05) << name;
  }
}

TEST(LlamaModelTest, BadInputIsRefusedBeforeAnyHook) {
  const ModelConfig c = GqaUntiedBiases();
  LlamaModel model(c);
  RecordingParams hooks(RandomUnits(c, 1));
  auto x = Tokens(2 * c.n_ctx + 2, c.vocab, 1), y = Tokens(2 * c.n_ctx + 2, c.vocab, 2);
  std::vector<float> logits;
  auto code = [](const absl::Status& s) { return s.code(); };
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  // T > n_ctx.
  EXPECT_EQ(code(model.ForwardBackward(x.data(), y.data(), 2, c.n_ctx + 1, 1, hooks).status()),
            kInvalid);
  EXPECT_EQ(code(model.Logits(x.data(), 1, c.n_ctx + 1, hooks, &logits)), kInvalid);
  // Null targets.
  EXPECT_EQ(code(model.ForwardBackward(x.data(), nullptr, 1, 4, 1, hooks).status()), kInvalid);
  EXPECT_EQ(code(model.Forward(x.data(), nullptr, 1, 4, hooks).status()), kInvalid);
  // A token == vocab (the last element of the batch) or negative.
  x[7] = c.vocab;
  EXPECT_EQ(code(model.ForwardBackward(x.data(), y.data(), 2, 4, 1, hooks).status()), kInvalid);
  EXPECT_EQ(code(model.Logits(x.data(), 2, 4, hooks, &logits)), kInvalid);
  x[7] = 0;
  y[7] = c.vocab;
  EXPECT_EQ(code(model.Forward(x.data(), y.data(), 2, 4, hooks).status()), kInvalid);
  y[7] = -2;  // Negative other than kIgnoreTarget (-1: a position not counted).
  EXPECT_EQ(code(model.ForwardBackward(x.data(), y.data(), 2, 4, 1, hooks).status()), kInvalid);
  EXPECT_TRUE(hooks.calls.empty()) << hooks.calls.front();
  // And the model still works after the refusals.
  y[7] = 0;
  EXPECT_TRUE(model.ForwardBackward(x.data(), y.data(), 2, 4, 1, hooks).ok());
}

}  // namespace
}  // namespace zeroshard::llama_test
