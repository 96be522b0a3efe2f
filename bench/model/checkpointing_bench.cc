// What activation checkpointing (--activation-checkpointing blocks) costs
// and saves: for each preset (default small and medium), the model part of
// one training step, i.e. the global batch (default 16 sequences of n_ctx
// tokens, `zeroshard launch`'s default) in micro-batches (default 4) of
// ForwardBackward through LocalParams, with and without checkpointing
// (median of --reps timed steps after one warm-up step; modes interleaved so
// machine load hits both alike), and the activation bytes each holds
// (GptModel::ActivationBytes, equal to ModelActivationBytes). Prints the
// ratios blocks / none. Baseline: the same step without checkpointing.
//
// Usage: checkpointing_bench [--model small --model medium] [--global-batch 16]
//        [--micro-batch 4] [--reps 5] [--threads 1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/support/median.h"
#include "worker/model/gpt_model.h"
#include "worker/model/local_params.h"
#include "worker/model/model_init.h"

namespace zeroshard {
namespace {

using bench::Median;

struct Timed {
  std::vector<double> seconds;
  int64_t activation_bytes = 0;
};

// One step: global/micro ForwardBackward calls; returns its seconds.
double Step(GptModel& model, LocalParams& hooks, const std::vector<int32_t>& x,
            const std::vector<int32_t>& y, int global, int micro) {
  const int T = model.config().n_ctx;
  const auto start = std::chrono::steady_clock::now();
  for (int b = 0; b < global; b += micro) {
    const int n = std::min(micro, global - b);
    if (!model.ForwardBackward(x.data() + b * T, y.data() + b * T, n, T, 1.0f, hooks).ok()) {
      std::fprintf(stderr, "ForwardBackward failed\n");
      std::exit(1);
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void BenchPreset(const ModelConfig& c, const std::string& name, int global, int micro, int reps) {
  const int T = c.n_ctx;
  std::mt19937 rng(1);
  std::vector<int32_t> x(static_cast<size_t>(global) * T), y(x.size());
  for (auto& v : x) v = static_cast<int32_t>(rng() % 256);
  for (auto& v : y) v = static_cast<int32_t>(rng() % 256);
  LocalParams hooks(InitUnits(c, 1));
  GptModel none(c, ActivationCheckpointing::kNone), blocks(c, ActivationCheckpointing::kBlocks);
  Timed t_none, t_blocks;
  for (int r = 0; r <= reps; ++r) {  // r = 0 warms up.
    const double a = Step(none, hooks, x, y, global, micro);
    const double b = Step(blocks, hooks, x, y, global, micro);
    hooks.ZeroGrads();
    if (r == 0) continue;
    t_none.seconds.push_back(a);
    t_blocks.seconds.push_back(b);
  }
  t_none.activation_bytes = none.ActivationBytes();
  t_blocks.activation_bytes = blocks.ActivationBytes();
  const double mn = Median(t_none.seconds), mb = Median(t_blocks.seconds);
  std::printf("%-7s %3d %5d %4d | %10.1f %10.1f %6.3f | %10.2f %10.2f %6.3f\n", name.c_str(),
              c.n_layer, c.n_embd, T, mn * 1e3, mb * 1e3, mb / mn,
              t_none.activation_bytes / 1048576.0, t_blocks.activation_bytes / 1048576.0,
              static_cast<double>(t_blocks.activation_bytes) / t_none.activation_bytes);
}

int Run(int argc, char** argv) {
  std::vector<std::string> presets;
  int global = 16, micro = 4, reps = 5, threads = 1;
  CLI::App app("Activation checkpointing: step time and activation bytes, none vs blocks");
  app.add_option("--model", presets, "model presets (default: small medium)");
  app.add_option("--global-batch", global, "sequences per step")->check(CLI::PositiveNumber);
  app.add_option("--micro-batch", micro, "sequences per ForwardBackward")
      ->check(CLI::PositiveNumber);
  app.add_option("--reps", reps, "timed steps per mode (median reported)")
      ->check(CLI::Range(3, 1000));
  app.add_option("--threads", threads, "compute threads")->check(CLI::Range(1, 256));
  CLI11_PARSE(app, argc, argv);
  if (presets.empty()) presets = {"small", "medium"};
  SetComputeThreads(threads);
  std::printf("global batch %d in micro-batches of %d, %d compute thread(s), median of %d steps\n",
              global, micro, threads, reps);
  std::printf("%-7s %3s %5s %4s | %10s %10s %6s | %10s %10s %6s\n", "model", "L", "C", "T",
              "none ms", "blocks ms", "ratio", "none MiB", "blocks MiB", "ratio");
  for (const std::string& name : presets) {
    absl::StatusOr<ModelConfig> config = ModelPreset(name);
    if (!config.ok()) {
      std::fprintf(stderr, "%s\n", std::string(config.status().message()).c_str());
      return 2;
    }
    BenchPreset(*config, name, global, micro, reps);
  }
  return 0;
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) { return zeroshard::Run(argc, argv); }
