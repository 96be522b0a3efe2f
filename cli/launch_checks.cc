#include "cli/launch_checks.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/launch_plan.h"
#include "common/formats/hf_weights.h"
#include "common/model/hf_model_config.h"
#include "common/model/job_model.h"
#include "common/offload_config.h"
#include "common/status_macros.h"
#include "common/tokenizer/job_tokenizer.h"
#include "worker/data/text_corpus.h"
#include "worker/device/device_factory.h"
#include "worker/model/gpt_model.h"

namespace zeroshard::cli {
namespace {

// A fresh job must not pick up an earlier run's checkpoints by accident.
absl::Status CheckCheckpointDir(const JobConfig& job) {
  if (job.checkpoint_dir.empty() || job.resume) return absl::OkStatus();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(job.checkpoint_dir, ec)) {
    if (entry.path().filename().string().rfind("step-", 0) == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--checkpoint-dir ", job.checkpoint_dir,
          " already holds checkpoints: pass --resume to continue from them, or use an empty "
          "directory"));
    }
  }
  return absl::OkStatus();
}

// --device cuda where this machine shows no GPU, or more workers than GPUs
// on NCCL, fails here, in one line, rather than in every worker.
absl::Status CheckDevice(const JobConfig& job, int workers) {
  if (job.device != DeviceChoice::kCuda) return absl::OkStatus();
  ZS_RETURN_IF_ERROR(CreateDevice({"cuda", -1, 1}).status());
  return CheckRanksPerGpu(workers, VisibleCudaDevices(),
                          std::string(WordOf(kBackendWords, job.backend)));
}

// NVMe offload: the dir exists, is writable and holds every rank's files.
absl::Status CheckOffload(LaunchOptions& o, const ModelConfig& model) {
  const JobConfig& j = o.job;
  const bool opt = j.offload_optimizer == OptimizerOffload::kNvme,
             params = j.offload_params == ParamsOffload::kNvme;
  if (!opt && !params) return absl::OkStatus();
  std::error_code ec;
  o.job.offload_dir = std::filesystem::absolute(j.offload_dir, ec).string();
  const int units = static_cast<int>(ModelUnits(model).size());
  return CheckOffloadDir(j.offload_dir,
                         OffloadBytesNeeded(ModelParamCount(model), j.stage, o.workers, opt, params,
                                            static_cast<int>(DTypeSize(j.compute_dtype)), units));
}

// The job's model: a preset, or a model directory (made absolute, its
// description put in the job, and with --init pretrained its weights
// checked against the config: a missing or misshapen tensor stops the
// launch before any worker starts).
absl::StatusOr<ModelConfig> ResolveLaunchModel(JobConfig& job) {
  if (IsHfModelDir(job.model)) {
    std::error_code ec;
    job.model = std::filesystem::absolute(job.model, ec).string();
  }
  absl::StatusOr<ModelConfig> model = ResolveModel(job.model, job.seq_len);
  if (!model.ok()) {
    return absl::Status(model.status().code(),
                        absl::StrCat("--model ", job.model, ": ", model.status().message()));
  }
  if (!model->is_llama()) {
    if (job.seq_len > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--seq-len applies to model directories (preset ", job.model,
                       " trains on its own "
                       "context, ",
                       model->n_ctx, ")"));
    }
    return model;
  }
  job.model_desc = ModelConfigToJson(*model);
  if (job.init == ModelInit::kRandom) return model;
  absl::Status checked = HfWeights::OpenFor(job.model, ModelUnits(*model)).status();
  if (!checked.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--model ", job.model, ": ", checked.message()));
  }
  return model;
}

}  // namespace

absl::Status PrepareLaunch(LaunchOptions& o) {
  ZS_ASSIGN_OR_RETURN(o.job.compute_dtype, ParseDType(o.compute_dtype));
  const bool auto_stage = o.stage_flag == "auto";
  if (!auto_stage && !absl::SimpleAtoi(o.stage_flag, &o.job.stage)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stage: '", o.stage_flag, "' (expected 0..3 or auto)"));
  }
  ZS_ASSIGN_OR_RETURN(o.job.reduce_dtype, ParseDType(o.reduce_dtype));
  // Parsed here, not by the job's Validate, so the error names the flag.
  ZS_ASSIGN_OR_RETURN(const ActivationCheckpointing checkpointing,
                      ParseActivationCheckpointing(o.activation_checkpointing));
  o.job.activation_checkpointing = checkpointing;
  // Every worker of an embedded launch runs on this host, so on the CPU
  // `auto` is the shared-memory backend (an external coordinator's job says
  // its own).
  if (o.job.backend == BackendChoice::kAuto && o.job.device == DeviceChoice::kCpu) {
    o.job.backend = BackendChoice::kShm;
  }
  if (o.job.resume_step >= 0) o.job.resume = true;
  if (o.job.resume && o.job.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError("--resume needs --checkpoint-dir");
  }
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  o.job.threads = o.threads > 0 ? o.threads : std::max(1, cores / o.workers);
  ZS_ASSIGN_OR_RETURN(const ModelConfig model, ResolveLaunchModel(o.job));
  if (o.job.data.empty()) o.job.data = DefaultDataPaths();
  for (std::string& path : o.job.data) {
    std::error_code ec;
    const auto abs = std::filesystem::absolute(path, ec);
    if (!ec) path = abs.string();
  }
  if (!o.job.checkpoint_dir.empty()) {
    std::error_code ec;
    o.job.checkpoint_dir = std::filesystem::absolute(o.job.checkpoint_dir, ec).string();
  }
  ZS_RETURN_IF_ERROR(o.job.Validate());
  ZS_RETURN_IF_ERROR(CheckCheckpointDir(o.job));
  ZS_RETURN_IF_ERROR(CheckDevice(o.job, o.workers));
  // Loading is the check: a missing path, no text, a malformed token file or
  // an id outside the model's vocabulary is named in the error. The
  // tokenizer is settled here for every worker (job.tokenizer).
  ZS_ASSIGN_OR_RETURN(const std::unique_ptr<tokenizer::Tokenizer> tok,
                      tokenizer::ResolveJobTokenizer(&o.job));
  ZS_RETURN_IF_ERROR(TextCorpus::Load(o.job.data, {.vocab_size = model.vocab,
                                                   .tokenizer = tok.get(),
                                                   .threads = cores,
                                                   .context = model.n_ctx})
                         .status());
  // The stage decides the offload files' size: choose it first.
  ZS_RETURN_IF_ERROR(PlanLaunchMemory(o, model, auto_stage));
  return CheckOffload(o, model);
}

}  // namespace zeroshard::cli
