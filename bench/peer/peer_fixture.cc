// What bench/peer/peer_train.py needs to train the same job that
// `zeroshard launch` trains, so the peer starts from the same bits and sees
// the same samples in the same order:
//   DIR/init.safetensors  InitUnits(model, seed) under zeroshard's parameter
//                         names (common/model/model_config.h), fp32;
//   DIR/batches.u8        every step's global batch, uint8 [steps,
//                         global_batch, n_ctx + 1]: sample i of step s is
//                         the window BatchSampler gives (inputs are its first
//                         n_ctx bytes, targets its last n_ctx);
//   DIR/job.json          the model's shape and the job's optimizer and
//                         schedule (common/model/job_config.h defaults unless set);
//                         for a Hugging Face model directory (--model DIR)
//                         also "hf_model": DIR, whose own weights both sides
//                         start from (no init.safetensors then).
// The data are the launch defaults (DefaultDataPaths), as `zeroshard launch`
// reads them without --data.
//
// Usage: peer_fixture --out DIR [--model small|MODEL_DIR] [--seq-len T]
//        [--steps 60] [--global-batch 16] [--micro-batch 4] [--seed 1234]
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/formats/safetensors.h"
#include "common/infra/process_setup.h"
#include "common/model/job_config.h"
#include "common/model/job_model.h"
#include "common/model/model_config.h"
#include "common/shard_plan.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "worker/data/batch_sampler.h"
#include "worker/data/text_corpus.h"
#include "worker/model/model_init.h"

namespace zeroshard {
namespace {

absl::Status WriteInit(const ModelConfig& model, uint64_t seed, const std::string& path) {
  const std::vector<std::vector<float>> units = InitUnits(model, seed);
  ZS_ASSIGN_OR_RETURN(const ShardPlan plan, MakeShardPlan(ModelUnits(model), 1, 1));
  std::vector<SafetensorsEntry> entries;
  std::vector<std::pair<const float*, int64_t>> sources;  // First element, numel.
  for (size_t u = 0; u < plan.units.size(); ++u) {
    for (const ParamPlacement& p : plan.units[u].params) {
      entries.push_back({p.name, p.shape});
      sources.emplace_back(units[u].data() + p.offset, p.numel);
    }
  }
  return WriteSafetensors(path, entries, {{"seed", std::to_string(seed)}},
                          [&](size_t i, float* dst) {
                            const auto [src, n] = sources[i];
                            std::copy(src, src + n, dst);
                            return absl::OkStatus();
                          });
}

absl::Status WriteBatches(const JobConfig& job, const ModelConfig& model, const std::string& path) {
  ZS_ASSIGN_OR_RETURN(const TextCorpus corpus, TextCorpus::Load(DefaultDataPaths()));
  const BatchSampler sampler(corpus, Split::kTrain, job.seed);
  const int T = model.n_ctx;
  std::vector<int32_t> inputs(static_cast<size_t>(job.global_batch) * T), targets(inputs.size());
  std::vector<uint8_t> rows(static_cast<size_t>(job.global_batch) * (T + 1));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (int64_t step = 0; step < job.steps; ++step) {
    ZS_RETURN_IF_ERROR(
        sampler.FillBatch(step, 0, job.global_batch, T, inputs.data(), targets.data()));
    for (int i = 0; i < job.global_batch; ++i) {
      uint8_t* row = rows.data() + static_cast<size_t>(i) * (T + 1);
      for (int t = 0; t < T; ++t) row[t] = static_cast<uint8_t>(inputs[i * T + t]);
      row[T] = static_cast<uint8_t>(targets[i * T + T - 1]);
    }
    out.write(reinterpret_cast<const char*>(rows.data()),
              static_cast<std::streamsize>(rows.size()));
  }
  out.close();
  if (!out) return absl::InternalError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

absl::Status WriteJob(const JobConfig& job, const ModelConfig& model, const std::string& path) {
  const nlohmann::json j = {{"model", job.model},
                            {"vocab", model.vocab},
                            {"n_layer", model.n_layer},
                            {"n_embd", model.n_embd},
                            {"n_head", model.n_head},
                            {"n_ctx", model.n_ctx},
                            {"steps", job.steps},
                            {"global_batch", job.global_batch},
                            {"micro_batch", job.micro_batch},
                            {"seed", job.seed},
                            {"lr", job.lr},
                            {"warmup_steps", job.warmup_steps},
                            {"beta1", job.beta1},
                            {"beta2", job.beta2},
                            {"eps", job.eps},
                            {"weight_decay", job.weight_decay},
                            {"max_grad_norm", job.max_grad_norm}};
  nlohmann::json full = j;
  if (model.is_llama()) full["hf_model"] = job.model;
  std::ofstream out(path, std::ios::trunc);
  out << full.dump(2) << "\n";
  out.close();
  if (!out) return absl::InternalError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

absl::Status Run(const JobConfig& job, const std::string& dir) {
  ZS_ASSIGN_OR_RETURN(const ModelConfig model, ResolveModel(job.model, job.seq_len));
  std::filesystem::create_directories(dir);
  if (!model.is_llama()) ZS_RETURN_IF_ERROR(WriteInit(model, job.seed, dir + "/init.safetensors"));
  ZS_RETURN_IF_ERROR(WriteBatches(job, model, dir + "/batches.u8"));
  return WriteJob(job, model, dir + "/job.json");
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  zeroshard::SetUpProcess(argv[0]);
  CLI::App app{"Writes the initial weights, batches and job settings the PyTorch peer trains on"};
  zeroshard::JobConfig job;
  std::string dir;
  app.add_option("--out", dir, "output directory")->required();
  app.add_option("--model", job.model, zeroshard::ModelPresetFlagHelp())->capture_default_str();
  app.add_option("--seq-len", job.seq_len, "a model directory's training context")
      ->capture_default_str();
  app.add_option("--steps", job.steps, "steps of batches to write")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.add_option("--global-batch", job.global_batch, "sequences per step")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--micro-batch", job.micro_batch, "sequences per forward/backward")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--seed", job.seed, "initialisation and data seed")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const absl::Status status = zeroshard::Run(job, dir);
  if (!status.ok()) {
    std::fprintf(stderr, "peer_fixture: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
