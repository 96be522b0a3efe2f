// How fast a preset trains on the default text, single process, unsharded:
// GptModel + LocalParams + a plain AdamW (Loshchilov & Hutter, ICLR'19:
// decoupled weight decay, bias-corrected moments) written inline here, since
// the project's fused optimizer belongs to the engine. Prints the mean train
// loss every --every steps, the validation loss at the end, and tokens/s.
//
// Usage: train_small [--model small] [--steps 300] [--batch 16] [--lr 1e-3]
//                    [--threads 1] [--seed 1] [--data PATH...]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/status_macros.h"
#include "worker/data/batch_sampler.h"
#include "worker/data/text_corpus.h"
#include "worker/model/gpt_model.h"
#include "worker/model/local_params.h"
#include "worker/model/model_init.h"

namespace zeroshard {
namespace {

struct AdamW {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
  std::vector<std::vector<float>> m, v;
  int step = 0;
  void Update(LocalParams& p, float grad_scale) {
    if (m.empty()) {
      for (int u = 0; u < p.num_units(); ++u) {
        m.emplace_back(p.params(u).size(), 0.0f);
        v.emplace_back(p.params(u).size(), 0.0f);
      }
    }
    ++step;
    const float c1 = 1.0f - std::pow(beta1, step), c2 = 1.0f - std::pow(beta2, step);
    for (int u = 0; u < p.num_units(); ++u) {
      std::vector<float>& w = p.params(u);
      const std::vector<float>& g = p.grads(u);
      for (size_t i = 0; i < w.size(); ++i) {
        const float gi = g[i] * grad_scale;
        m[u][i] = beta1 * m[u][i] + (1 - beta1) * gi;
        v[u][i] = beta2 * v[u][i] + (1 - beta2) * gi * gi;
        w[i] -= lr * (m[u][i] / c1 / (std::sqrt(v[u][i] / c2) + eps) + weight_decay * w[i]);
      }
    }
  }
};

// What one step needs: the model, its parameters, the samplers and the
// token buffers of one micro-batch.
struct SmallRun {
  GptModel& model;
  LocalParams& params;
  const BatchSampler& train;
  const BatchSampler& val;
  int batch, micro, T;
  std::vector<int32_t> x, y;
};

// Forward and backward over step `step`'s global batch; the summed loss.
absl::StatusOr<double> TrainStep(SmallRun& r, int step) {
  r.params.ZeroGrads();
  double loss = 0.0;
  for (int b = 0; b < r.batch; b += r.micro) {
    const int n = std::min(r.micro, r.batch - b);
    ZS_RETURN_IF_ERROR(r.train.FillBatch(step, b, b + n, r.T, r.x.data(), r.y.data()));
    ZS_ASSIGN_OR_RETURN(const double l,
                        r.model.ForwardBackward(r.x.data(), r.y.data(), n, r.T, 1.0f, r.params));
    loss += l;
  }
  return loss;
}

// Mean validation loss per token over `batches` micro-batches.
absl::StatusOr<double> ValidationLoss(SmallRun& r, int batches) {
  double loss = 0.0;
  for (int b = 0; b < batches; ++b) {
    ZS_RETURN_IF_ERROR(
        r.val.FillBatch(0, b * r.micro, (b + 1) * r.micro, r.T, r.x.data(), r.y.data()));
    ZS_ASSIGN_OR_RETURN(const double l,
                        r.model.Forward(r.x.data(), r.y.data(), r.micro, r.T, r.params));
    loss += l;
  }
  return loss / (static_cast<double>(batches) * r.micro * r.T);
}

// The training text (launch's default when `data` is empty), timed.
absl::StatusOr<TextCorpus> LoadCorpus(std::vector<std::string> data) {
  if (data.empty()) data = DefaultDataPaths();
  const auto t_load = std::chrono::steady_clock::now();
  ZS_ASSIGN_OR_RETURN(TextCorpus corpus, TextCorpus::Load(data));
  std::printf("data: %zu files, %.1f MiB (%d binary skipped), loaded in %.2f s\n",
              corpus.files().size(), corpus.total_bytes() / 1048576.0,
              corpus.skipped_binary_files(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count());
  return corpus;
}

// `steps` steps, printing the mean train loss and tokens/s every `every`.
absl::Status TrainSteps(SmallRun& run, LocalParams& params, AdamW& opt, int steps, int every,
                        double tokens_per_step) {
  const auto start = std::chrono::steady_clock::now();
  double window = 0.0;
  for (int step = 0; step < steps; ++step) {
    absl::StatusOr<double> loss = TrainStep(run, step);
    if (!loss.ok()) return loss.status();
    opt.Update(params, static_cast<float>(1.0 / tokens_per_step));
    window += *loss / tokens_per_step;
    if ((step + 1) % every == 0) {
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::printf("step %5d  train loss %.4f  %.0f tokens/s  %.1f s\n", step + 1, window / every,
                  (step + 1) * tokens_per_step / secs, secs);
      std::fflush(stdout);
      window = 0.0;
    }
  }
  return absl::OkStatus();
}

int Run(int argc, char** argv) {
  std::string preset = "small";
  int steps = 300, batch = 16, threads = 1, every = 25, micro = 8;
  float lr = 1e-3f;
  uint64_t seed = 1;
  std::vector<std::string> data;
  CLI::App app("Single-process training of the reference model (unsharded baseline)");
  app.add_option("--model", preset);
  app.add_option("--steps", steps);
  app.add_option("--batch", batch, "global batch in sequences");
  app.add_option("--micro", micro, "sequences per ForwardBackward call");
  app.add_option("--lr", lr);
  app.add_option("--threads", threads);
  app.add_option("--seed", seed);
  app.add_option("--every", every);
  app.add_option("--data", data);
  CLI11_PARSE(app, argc, argv);
  auto fail = [](const absl::Status& s) {
    std::fprintf(stderr, "error: %s\n", std::string(s.message()).c_str());
    return 1;
  };
  absl::StatusOr<ModelConfig> config = ModelPreset(preset);
  if (!config.ok()) return fail(config.status());
  absl::StatusOr<TextCorpus> corpus = LoadCorpus(data);
  if (!corpus.ok()) return fail(corpus.status());
  SetComputeThreads(threads);
  const int T = config->n_ctx;
  const BatchSampler train(*corpus, Split::kTrain, seed), val(*corpus, Split::kValidation, seed);
  LocalParams params(InitUnits(*config, seed));
  GptModel model(*config);
  SmallRun run{model,
               params,
               train,
               val,
               batch,
               micro,
               T,
               std::vector<int32_t>(micro * T),
               std::vector<int32_t>(micro * T)};
  AdamW opt;
  opt.lr = lr;
  const double tokens_per_step = static_cast<double>(batch) * T;
  const absl::Status trained = TrainSteps(run, params, opt, steps, every, tokens_per_step);
  if (!trained.ok()) return fail(trained);
  const int val_batches = 8;
  absl::StatusOr<double> vloss = ValidationLoss(run, val_batches);
  if (!vloss.ok()) return fail(vloss.status());
  std::printf("validation loss %.4f over %d sequences (ln 256 = %.4f)\n", *vloss,
              val_batches * micro, std::log(256.0));
  return 0;
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) { return zeroshard::Run(argc, argv); }
