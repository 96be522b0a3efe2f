// The whole model's loss and every gradient against an independent NumPy
// float64 implementation (tests/model/reference_gpt.py) on the same weights
// and tokens, exchanged as raw little-endian files in a temp directory.
// Tolerance: loss 1e-5 relative; each parameter tensor's gradient within
// 1e-4 of that tensor's largest |gradient| (float32 accumulation over ~10^3
// terms vs float64; measured worst ~1e-6). The reference checks its own
// backward against float64 finite differences (--selfcheck) on the tiny
// case. Skips (GTEST_SKIP) when python3 or NumPy is missing.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"
#include "worker/model/gpt_model.h"
#include "worker/model/local_params.h"
#include "worker/model/model_init.h"

namespace zeroshard {
namespace {

template <typename T>
void WriteRaw(const std::string& path, const std::vector<T>& v) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  ASSERT_TRUE(out.good()) << path;
}

std::vector<double> ReadF64(const std::string& path) {
  const std::string bytes = testing::ReadFile(path);
  std::vector<double> v(bytes.size() / 8);
  std::memcpy(v.data(), bytes.data(), v.size() * 8);
  return v;
}

struct Case {
  const char* name;
  ModelConfig config;
  int B, T;
  float scale;
};

// Writes the units, inputs, targets and a meta.txt the NumPy reference
// (tests/model/reference_gpt.py) reads, into `dir`.
void WriteReferenceInputs(const std::string& dir, const Case& tc, const ShardPlan& plan,
                          const std::vector<std::vector<float>>& units,
                          const std::vector<int32_t>& x, const std::vector<int32_t>& y) {
  const ModelConfig& c = tc.config;
  std::string meta =
      absl::StrCat("config ", c.vocab, " ", c.n_layer, " ", c.n_embd, " ", c.n_head, " ", c.n_ctx,
                   "\nbatch ", tc.B, " ", tc.T, "\nscale ", tc.scale, "\n");
  for (size_t u = 0; u < plan.units.size(); ++u) {
    for (const ParamPlacement& p : plan.units[u].params) {
      absl::StrAppend(&meta, "param ", u, " ", p.name, " ", p.offset);
      for (int64_t d : p.shape) absl::StrAppend(&meta, " ", d);
      absl::StrAppend(&meta, "\n");
    }
    WriteRaw(absl::StrCat(dir, "/unit_", u, ".f32"), units[u]);
  }
  std::ofstream(dir + "/meta.txt") << meta;
  WriteRaw(dir + "/inputs.i32", x);
  WriteRaw(dir + "/targets.i32", y);
}

// Every parameter's gradient against the reference's grad_<u>.f64, relative
// to the parameter's largest reference gradient; returns the worst error.
double ExpectGradientsMatch(const std::string& dir, const ShardPlan& plan,
                            const LocalParams& hooks) {
  double overall = 0.0;
  for (size_t u = 0; u < plan.units.size(); ++u) {
    const std::vector<double> g = ReadF64(absl::StrCat(dir, "/grad_", u, ".f64"));
    EXPECT_EQ(g.size(), hooks.grads(u).size());
    if (g.size() != hooks.grads(u).size()) return 1.0;
    for (const ParamPlacement& p : plan.units[u].params) {
      double max_ref = 0.0;
      for (int64_t i = 0; i < p.numel; ++i) max_ref = std::max(max_ref, std::abs(g[p.offset + i]));
      EXPECT_GT(max_ref, 0.0) << p.name << " has no gradient in the reference";
      double worst = 0.0;
      for (int64_t i = 0; i < p.numel; ++i) {
        const double d = std::abs(hooks.grads(u)[p.offset + i] - g[p.offset + i]);
        worst = std::max(worst, d / max_ref);
      }
      EXPECT_LT(worst, 1e-4) << p.name << ": worst |grad - ref| / max|ref|";
      overall = std::max(overall, worst);
    }
  }
  return overall;
}

class GptReferenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(GptReferenceTest, LossAndEveryGradientMatchNumpy) {
  const testing::CommandResult probe = testing::RunCommand("python3 -c 'import numpy'");
  if (probe.exit_code != 0) GTEST_SKIP() << "python3 with numpy not available: " << probe.output;
  const Case& tc = GetParam();
  const ModelConfig& c = tc.config;
  // Perturb the GPT-2 init (biases and LayerNorm affine are 0 / 1 there) so
  // every gradient path is exercised with non-trivial values.
  std::vector<std::vector<float>> units = InitUnits(c, 11);
  std::mt19937 rng(5);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  for (auto& u : units) {
    for (float& v : u) v += noise(rng);
  }
  std::vector<int32_t> x(tc.B * tc.T), y(tc.B * tc.T);
  for (int i = 0; i < tc.B * tc.T; ++i) {
    x[i] = static_cast<int32_t>(rng() % c.vocab);
    y[i] = static_cast<int32_t>(rng() % c.vocab);
  }
  x[1] = x[0];  // A repeated token: its embedding gradient accumulates.

  const std::string dir = testing::MakeTempDir("gpt_reference");
  const ShardPlan plan = *MakeShardPlan(ModelUnits(c), 1, 1);
  WriteReferenceInputs(dir, tc, plan, units, x, y);
  const std::string script =
      std::string(std::getenv("ZEROSHARD_SOURCE_DIR")) + "/tests/model/reference_gpt.py";
  const testing::CommandResult ref = testing::RunCommand(absl::StrCat(
      "python3 ", script, " ", dir, std::string(tc.name) == "tiny" ? " --selfcheck" : ""));
  ASSERT_EQ(ref.exit_code, 0) << ref.output;

  LocalParams hooks(units);
  GptModel model(c);
  absl::StatusOr<double> loss =
      model.ForwardBackward(x.data(), y.data(), tc.B, tc.T, tc.scale, hooks);
  ASSERT_TRUE(loss.ok()) << loss.status();
  const double ref_loss = ReadF64(dir + "/loss.f64").at(0);
  EXPECT_NEAR(*loss, ref_loss, 1e-5 * std::abs(ref_loss));
  const double overall = ExpectGradientsMatch(dir, plan, hooks);
  std::printf("loss %.6f (reference %.6f); worst gradient error %.3g of max|ref|\n", *loss,
              ref_loss, overall);
}

INSTANTIATE_TEST_SUITE_P(
    Configs, GptReferenceTest,
    ::testing::Values(Case{"tiny", Gpt2Config(256, 2, 32, 2, 16), 2, 16, 1.0f},
                      // Odd shapes: 3 heads of 8, T shorter than n_ctx, a loss scale.
                      Case{"odd", Gpt2Config(256, 3, 24, 3, 9), 3, 7, 0.37f}),
    [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace zeroshard
