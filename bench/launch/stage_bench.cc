// What sharding costs and buys, for one model on this machine: `zeroshard
// launch` at N workers (default 2) for ZeRO stages 0-3, and, in the same
// run, a single-process unsharded baseline (GptModel + LocalParams + the
// fused AdamW over all parameters, no communication). Reports median step
// time and tokens/s (steps after the first --skip), each stage's ratio to the
// baseline's tokens/s, and peak model-state bytes per rank by kind.
//
// Usage: stage_bench [--model small] [--workers 2] [--steps 30] [--repeats 3]
//                    [--launch-flags "--bucket-mib 0"]
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "bench/support/median.h"
#include "worker/data/batch_sampler.h"
#include "worker/model/gpt_model.h"
#include "worker/model/local_params.h"
#include "worker/model/model_init.h"
#include "worker/optim/adamw.h"
#include "worker/optim/job_adamw.h"
#include "worker/trainer/step_record.h"

namespace zeroshard {
namespace {

using bench::Median;

struct Options {
  std::string model = "small";
  int workers = 2, steps = 30, repeats = 3, skip = 5, global_batch = 16;
  std::string launch_flags;  // Appended to every sharded run's command line.
};

struct StageRun {
  std::vector<double> step_seconds;
  MemoryByKind peak;  // Rank 0's peak.
};

StageRun RunStage(const Options& o, int stage, const std::string& dir) {
  const std::string log = absl::StrCat(dir, "/stage", stage, ".jsonl");
  std::filesystem::remove(log);
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
  const std::string cmd =
      absl::StrCat(self, "/zeroshard launch --workers ", o.workers, " --stage ", stage, " --model ",
                   o.model, " --steps ", o.steps, " --global-batch ", o.global_batch,
                   " --eval-every 0 --threads 1 --run-dir ", dir, "/run --log ", log, " ",
                   o.launch_flags, " > /dev/null 2>&1");
  StageRun run;
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "stage %d: launch failed (%s)\n", stage, cmd.c_str());
    return run;
  }
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    auto r = StepRecord::FromJsonLine(line);
    if (!r.ok() || r->step <= o.skip || r->step == o.steps) continue;  // last step evaluates
    run.step_seconds.push_back(r->step_seconds);
    run.peak = r->ranks[0].peak_memory;
  }
  return run;
}

// The clipping coefficient over every gradient (1 when max_norm <= 0), as
// the engine applies it.
float ClipScale(const LocalParams& params, float max_norm) {
  if (max_norm <= 0) return 1.0f;
  double sum = 0;
  for (int u = 0; u < params.num_units(); ++u) {
    for (float g : params.grads(u)) sum += static_cast<double>(g) * g;
  }
  const double norm = std::sqrt(sum);
  return static_cast<float>(ClipCoefficient(max_norm, norm));
}

// Single process, all parameters, no communication: the unsharded baseline.
std::vector<double> RunBaseline(const Options& o) {
  const ModelConfig config = *ModelPreset(o.model);
  const TextCorpus corpus = *TextCorpus::Load(DefaultDataPaths());
  BatchSampler sampler(corpus, Split::kTrain, 1);
  GptModel model(config);
  LocalParams params(InitUnits(config, 1));
  std::vector<std::vector<float>> m, v;
  for (int u = 0; u < params.num_units(); ++u) {
    m.emplace_back(params.params(u).size(), 0.0f);
    v.emplace_back(params.params(u).size(), 0.0f);
  }
  // The job's optimizer, as `zeroshard launch` runs it: schedule, betas,
  // weight decay and gradient clipping (job config defaults).
  const JobConfig job;
  AdamWHyperparams hp = JobAdamW(job);
  const int T = config.n_ctx, B = o.global_batch;
  std::vector<int32_t> in(static_cast<size_t>(B) * T), tg(in.size());
  std::vector<double> seconds;
  for (int step = 0; step < o.steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    params.ZeroGrads();
    for (int b = 0; b < B; b += 4) {  // micro-batches of 4, as launch's default
      (void)sampler.FillBatch(step, b, b + 4, T, in.data(), tg.data());
      (void)model.ForwardBackward(in.data(), tg.data(), 4, T, 1.0f / (B * T), params);
    }
    hp.lr = static_cast<float>(LearningRateAt(job, step));
    const float clip = ClipScale(params, static_cast<float>(job.max_grad_norm));
    for (int u = 0; u < params.num_units(); ++u) {
      AdamWShard shard{params.params(u).data(), m[u].data(), v[u].data(), params.grads(u).data(),
                       static_cast<int64_t>(params.params(u).size())};
      AdamWCpu(hp, step + 1, clip, shard, 1);
    }
    if (step >= o.skip) {
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
  }
  return seconds;
}

void PrintTable(const Options& o, const std::vector<std::vector<StageRun>>& stages,
                const std::vector<double>& baseline) {
  const double tokens = static_cast<double>(o.global_batch) * ModelPreset(o.model)->n_ctx;
  const double base_tps = tokens / Median(baseline);
  std::printf("\nmodel %s, %lld params, global batch %d x %d tokens, N = %d, medians of %d runs\n",
              o.model.c_str(), static_cast<long long>(ModelParamCount(*ModelPreset(o.model))),
              o.global_batch, ModelPreset(o.model)->n_ctx, o.workers, o.repeats);
  std::printf("%-22s %10s %10s %8s %10s %10s %10s %10s\n", "run", "step s", "tokens/s", "vs base",
              "params B", "grads B", "optim B", "buffers B");
  std::printf("%-22s %10.4f %10.0f %8.2f %10s %10s %10s %10s\n", "unsharded, 1 process",
              Median(baseline), base_tps, 1.0, "-", "-", "-", "-");
  for (int s = 0; s < 4; ++s) {
    std::vector<double> medians;
    for (const StageRun& r : stages[s]) medians.push_back(Median(r.step_seconds));
    const double step = Median(medians);
    const MemoryByKind& m = stages[s].back().peak;
    std::printf("%-22s %10.4f %10.0f %8.2f %10lld %10lld %10lld %10lld\n",
                absl::StrCat("stage ", s, ", N = ", o.workers).c_str(), step, tokens / step,
                tokens / step / base_tps, static_cast<long long>(m.params),
                static_cast<long long>(m.grads), static_cast<long long>(m.optimizer),
                static_cast<long long>(m.buffers));
  }
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  zeroshard::Options o;
  CLI::App app{"stage_bench: step time and memory per ZeRO stage vs an unsharded baseline"};
  app.add_option("--model", o.model, "model preset (zeroshard launch --help lists them)");
  app.add_option("--workers", o.workers, "world size of the sharded runs")
      ->check(CLI::PositiveNumber);
  app.add_option("--steps", o.steps, "steps per run (the last one evaluates: left out)")
      ->check(CLI::PositiveNumber);
  app.add_option("--repeats", o.repeats, "runs per stage (median of their medians)")
      ->check(CLI::PositiveNumber);
  app.add_option("--skip", o.skip, "warm-up steps left out of the medians");
  app.add_option("--global-batch", o.global_batch)->check(CLI::PositiveNumber);
  app.add_option("--launch-flags", o.launch_flags,
                 "more zeroshard launch flags for the sharded runs (\"--bucket-mib 0\")");
  CLI11_PARSE(app, argc, argv);
  if (o.global_batch % 4 != 0 || o.steps <= o.skip + 1) {
    std::fprintf(stderr, "--global-batch must be a multiple of 4 and --steps > --skip + 1\n");
    return 2;
  }
  const std::string dir = "/tmp/zeroshard_stage_bench_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::vector<std::vector<zeroshard::StageRun>> stages(4);
  std::vector<double> baseline;
  for (int rep = 0; rep < o.repeats; ++rep) {  // interleaved, so load drifts hit all alike
    auto b = zeroshard::RunBaseline(o);
    baseline.push_back(zeroshard::Median(b));
    for (int s = 0; s < 4; ++s) stages[s].push_back(zeroshard::RunStage(o, s, dir));
  }
  zeroshard::PrintTable(o, stages, baseline);
  std::filesystem::remove_all(dir);
  return 0;
}
