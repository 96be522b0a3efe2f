// Forward+backward time of the reference model on the CPU backend.
//
// Reports, for a preset (default "small") at batch B (default 8) x n_ctx
// tokens, on 1 and 2 compute threads: the median of --reps timed
// ForwardBackward calls (after 2 warm-up calls), tokens/s, achieved GFLOP/s
// (model FLOPs ~ 6 * non-embedding params * tokens + 6 * layers * T * C *
// tokens for attention (Kaplan et al., 2020, table 1), plus 6 * V * C *
// tokens for the head), and the ratio to a limit measured in the same run:
// the CPU backend's sgemm (oneDNN) GFLOP/s on a 1024^3 product at the same
// thread count.
//
// Usage: model_bench [--model small] [--batch 8] [--reps 10]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/support/median.h"
#include "worker/model/gpt_model.h"
#include "worker/model/local_params.h"
#include "worker/model/model_init.h"

namespace zeroshard {
namespace {

using bench::Median;

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double SgemmGflops(int reps) {
  const int n = 1024;
  std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n);
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto s = std::chrono::steady_clock::now();
    CpuKernels().Matmul(false, false, n, n, n, 1.0f, a.data(), b.data(), 0.0f, c.data());
    t.push_back(Seconds(s, std::chrono::steady_clock::now()));
  }
  return 2.0 * n * n * n / Median(t) / 1e9;
}

int Run(int argc, char** argv) {
  std::string preset = "small";
  int batch = 8, reps = 10;
  CLI::App app("Reference model forward+backward benchmark");
  app.add_option("--model", preset, "model preset");
  app.add_option("--batch", batch, "sequences per micro-batch");
  app.add_option("--reps", reps, "timed repetitions (median reported)");
  CLI11_PARSE(app, argc, argv);
  absl::StatusOr<ModelConfig> config = ModelPreset(preset);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  const ModelConfig& c = *config;
  const int T = c.n_ctx;
  const double tokens = static_cast<double>(batch) * T;
  const double embed =
      static_cast<double>(c.vocab) * c.n_embd + static_cast<double>(c.n_ctx) * c.n_embd;
  const double flops = 6.0 * (ModelParamCount(c) - embed) * tokens +
                       6.0 * c.n_layer * T * c.n_embd * tokens + 6.0 * c.vocab * c.n_embd * tokens;
  std::mt19937 rng(1);
  std::vector<int32_t> x(batch * T), y(batch * T);
  for (auto& v : x) v = rng() % 256;
  for (auto& v : y) v = rng() % 256;
  LocalParams hooks(InitUnits(c, 1));
  GptModel model(c);
  std::printf(
      "model %s: %d layers, %d wide, %d heads, ctx %d; %lld params (%.1f MiB fp32); "
      "batch %d x %d tokens; activations %.1f MiB\n",
      preset.c_str(), c.n_layer, c.n_embd, c.n_head, c.n_ctx,
      static_cast<long long>(ModelParamCount(c)), ModelParamBytes(c) / 1048576.0, batch, T,
      ModelActivationBytes(c, batch, T) / 1048576.0);
  std::printf("%-8s %12s %12s %10s %12s %10s\n", "threads", "fwd+bwd ms", "tokens/s", "GFLOP/s",
              "sgemm GFLOP/s", "ratio");
  for (int threads : {1, 2}) {
    SetComputeThreads(threads);
    const double peak = SgemmGflops(5);
    std::vector<double> t;
    for (int r = 0; r < reps + 2; ++r) {
      const auto s = std::chrono::steady_clock::now();
      absl::StatusOr<double> loss =
          model.ForwardBackward(x.data(), y.data(), batch, T, 1.0f, hooks);
      if (!loss.ok()) return 1;
      if (r >= 2) t.push_back(Seconds(s, std::chrono::steady_clock::now()));
    }
    const double m = Median(t);
    std::printf("%-8d %12.2f %12.0f %10.2f %12.2f %10.2f\n", threads, m * 1e3, tokens / m,
                flops / m / 1e9, peak, flops / m / 1e9 / peak);
  }
  return 0;
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) { return zeroshard::Run(argc, argv); }
