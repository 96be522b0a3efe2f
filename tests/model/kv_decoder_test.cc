// KvDecoder against the training models' own forward (CausalLm::Logits over
// the whole sequence, the same parameters): the last position's logits of a
// prefill of all tokens at once, and of one token at a time, equal the full
// forward's at every position within 1e-4 relative, for a gpt2 preset and
// every Llama-family variant of llama_test_util.h; past the cache's
// positions (the model's context, or fewer when asked), or an id outside
// the vocabulary, is refused.
#include "worker/model/kv_decoder.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/model/llama_test_util.h"
#include "worker/model/causal_lm.h"
#include "worker/model/local_params.h"
#include "worker/model/model_init.h"

namespace zeroshard {
namespace {

double WorstRelative(const float* a, const float* b, int n) {
  double scale = 0, worst = 0;
  for (int i = 0; i < n; ++i) scale = std::max(scale, std::abs(double{b[i]}));
  for (int i = 0; i < n; ++i) worst = std::max(worst, std::abs(double{a[i]} - b[i]) / scale);
  return worst;
}

void ExpectDecoderMatchesModel(const ModelConfig& config, const std::string& name) {
  const std::vector<std::vector<float>> units =
      config.is_llama() ? llama_test::RandomUnits(config, 7) : InitUnits(config, 7);
  const int T = std::min(config.n_ctx, 12), V = config.vocab;
  std::mt19937 rng(3);
  std::vector<int32_t> tokens(T);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % V);
  LocalParams params(units);
  std::vector<float> full;
  ASSERT_TRUE(CreateCausalLm(config)->Logits(tokens.data(), 1, T, params, &full).ok()) << name;

  absl::StatusOr<std::unique_ptr<KvDecoder>> made = CreateKvDecoder(config, units);
  ASSERT_TRUE(made.ok()) << made.status();
  std::unique_ptr<KvDecoder> whole = std::move(made).value();
  std::vector<float> logits;
  ASSERT_TRUE(whole->Append(tokens, &logits).ok()) << name;
  EXPECT_LE(WorstRelative(logits.data(), full.data() + int64_t{T - 1} * V, V), 1e-4) << name;

  made = CreateKvDecoder(config, units);
  ASSERT_TRUE(made.ok()) << made.status();
  std::unique_ptr<KvDecoder> step = std::move(made).value();
  for (int t = 0; t < T; ++t) {
    ASSERT_TRUE(step->Append({tokens[t]}, &logits).ok()) << name;
    EXPECT_LE(WorstRelative(logits.data(), full.data() + int64_t{t} * V, V), 1e-4)
        << name << " position " << t;
  }
  EXPECT_EQ(step->position(), T);
  EXPECT_EQ(step->Append({V}, &logits).code(), absl::StatusCode::kInvalidArgument) << name;
  std::vector<int32_t> too_many(config.n_ctx - T + 1, 0);
  EXPECT_EQ(step->Append(too_many, &logits).code(), absl::StatusCode::kInvalidArgument) << name;
}

TEST(KvDecoder, Gpt2PresetMatchesTheModelsForward) {
  absl::StatusOr<ModelConfig> small = ModelPreset("small");
  ASSERT_TRUE(small.ok());
  ExpectDecoderMatchesModel(*small, "small");
}

TEST(KvDecoder, LlamaVariantsMatchTheModelsForward) {
  for (const auto& [name, config] : llama_test::OddConfigs())
    ExpectDecoderMatchesModel(config, name);
}

TEST(KvDecoder, ACacheOfFewerPositionsThanTheContextRefusesPastThem) {
  const ModelConfig config = llama_test::QkNormTied();
  const std::vector<std::vector<float>> units = llama_test::RandomUnits(config, 7);
  absl::StatusOr<std::unique_ptr<KvDecoder>> d = CreateKvDecoder(config, units, {.positions = 5});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)->positions(), 5);
  std::vector<float> logits;
  ASSERT_TRUE((*d)->Append({1, 2, 3, 4, 5}, &logits).ok());
  const absl::Status past = (*d)->Append({1}, &logits);
  EXPECT_EQ(past.code(), absl::StatusCode::kInvalidArgument) << past;
  EXPECT_NE(past.message().find("past the 5"), std::string::npos) << past;
  absl::StatusOr<std::unique_ptr<KvDecoder>> whole =
      CreateKvDecoder(config, units, {.positions = 1 << 30});
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ((*whole)->positions(), config.n_ctx) << "capped at the model's context";
}

}  // namespace
}  // namespace zeroshard
