#include "common/job_config.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "absl/strings/str_cat.h"
#include "common/job_model.h"
#include "common/offload_config.h"
#include "common/status_macros.h"
#include "common/zero_stage.h"
#include "nlohmann/json.hpp"

namespace zeroshard {
namespace {

absl::Status OutOfRange(const char* field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("job config: ", field, " ", why));
}

// device and backend: known names, and a backend that moves the device's memory.
absl::Status CheckDeviceAndBackend(const std::string& device, const std::string& backend) {
  if (device != "cpu" && device != "cuda" && device != "auto") {
    return OutOfRange("device", absl::StrCat("= \"", device, "\" is not cpu, cuda or auto"));
  }
  if (backend != "gloo" && backend != "shm" && backend != "nccl" && backend != "host-staged" &&
      backend != "auto") {
    return OutOfRange("backend", absl::StrCat("= \"", backend,
                                              "\" is not gloo, shm, nccl, host-staged or auto"));
  }
  if (backend == "shm" && device != "cpu") {
    return OutOfRange("backend", "shm moves host memory: it needs device cpu (on GPUs use nccl "
                                 "or host-staged)");
  }
  if (device == "cpu" && (backend == "nccl" || backend == "host-staged")) {
    return OutOfRange("backend", absl::StrCat(backend, " needs device cuda (or auto); on the CPU use gloo or shm"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status JobConfig::Validate() const {
  if (init != "pretrained" && init != "random") {
    return OutOfRange("init", absl::StrCat("= \"", init, "\" is not pretrained or random"));
  }
  if (seq_len < 0 || seq_len > (1 << 20)) return OutOfRange("seq_len", "must be in [0, 2^20]");
  if (!IsZeroStage(stage)) return OutOfRange("stage", absl::StrCat("= ", stage, " is not 0, 1, 2 or 3"));
  if (steps < 1 || steps > 100'000'000) return OutOfRange("steps", "must be in [1, 1e8]");
  if (global_batch < 1 || global_batch > 1'000'000) return OutOfRange("global_batch", "must be in [1, 1e6]");
  if (micro_batch < 1 || micro_batch > 65536) return OutOfRange("micro_batch", "must be in [1, 65536]");
  if (compute_dtype == DType::kFp16 || reduce_dtype == DType::kFp16) {
    return OutOfRange("compute_dtype/reduce_dtype", "must be fp32 or bf16");
  }
  if (!(lr > 0 && lr < 10)) return OutOfRange("lr", "must be in (0, 10)");
  if (warmup_steps < 0) return OutOfRange("warmup_steps", "must be >= 0");
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1)) return OutOfRange("beta1/beta2", "must be in [0, 1)");
  if (!(eps > 0)) return OutOfRange("eps", "must be > 0");
  if (!(weight_decay >= 0)) return OutOfRange("weight_decay", "must be >= 0");
  if (eval_every < 0 || eval_batches < 1) return OutOfRange("eval_every/eval_batches", "must be >= 0 / >= 1");
  if (sample_every < 0 || sample_tokens < 1 || sample_tokens > 4096) {
    return OutOfRange("sample_every/sample_tokens", "must be >= 0 / in [1, 4096]");
  }
  if (threads < 1 || threads > 256) return OutOfRange("threads", "must be in [1, 256]");
  ZS_RETURN_IF_ERROR(CheckDeviceAndBackend(device, backend));
  if (checkpoint_every < 0) return OutOfRange("checkpoint_every", "must be >= 0");
  if (redundancy != 0 && redundancy != 1) return OutOfRange("redundancy", "must be 0 or 1");
  if (redundancy_every < 1) return OutOfRange("redundancy_every", "must be >= 1");
  ZS_RETURN_IF_ERROR(CheckOffloadValue("job config: offload_optimizer", offload_optimizer, "none|host|nvme"));
  ZS_RETURN_IF_ERROR(CheckOffloadValue("job config: offload_params", offload_params, "none|nvme"));
  if ((offload_optimizer == "nvme" || offload_params == "nvme") && offload_dir.empty()) {
    return OutOfRange("offload_dir", "is needed for nvme offload");
  }
  if (offload_params == "nvme" && !ZeroStageOf(stage).shards_params) {
    return OutOfRange("offload_params", "nvme needs stage 3");
  }
  if (offload_prefetch < 0 || offload_prefetch > 64) return OutOfRange("offload_prefetch", "must be in [0, 64]");
  if (gather_prefetch < 0 || gather_prefetch > 64) return OutOfRange("gather_prefetch", "must be in [0, 64]");
  if (!(bucket_mib >= 0 && bucket_mib <= 4096)) return OutOfRange("bucket_mib", "must be in [0, 4096]");
  if (activation_checkpointing != "none" && activation_checkpointing != "blocks") {
    return OutOfRange("activation_checkpointing",
                      absl::StrCat("= \"", activation_checkpointing, "\" is not none or blocks"));
  }
  if (!(collective_timeout_s > 0 && collective_timeout_s <= 3600)) {
    return OutOfRange("collective_timeout_s", "must be in (0, 3600]");
  }
  if (!(checkpoint_timeout_s > 0 && checkpoint_timeout_s <= 86400)) {
    return OutOfRange("checkpoint_timeout_s", "must be in (0, 86400]");
  }
  if (!(rpc_timeout_s > 0 && rpc_timeout_s <= 3600) ||
      !(trigger_poll_timeout_s > 0 && trigger_poll_timeout_s <= 3600)) {
    return OutOfRange("rpc_timeout_s/trigger_poll_timeout_s", "must be in (0, 3600]");
  }
  if (max_failures < 0 || max_failures > 1'000'000) {
    return OutOfRange("max_failures", absl::StrCat("= ", max_failures, " must be in [0, 1e6]"));
  }
  if (checkpoint_every > 0 && checkpoint_dir.empty()) {
    return OutOfRange("checkpoint_every", "needs a checkpoint_dir");
  }
  return absl::OkStatus();
}

std::string JobConfig::ToJson() const {
  nlohmann::json j = {
      {"model", model}, {"model_desc", model_desc}, {"init", init}, {"seq_len", seq_len},
      {"tokenizer", tokenizer},
      {"stage", stage}, {"steps", steps}, {"global_batch", global_batch},
      {"micro_batch", micro_batch}, {"data", data}, {"seed", seed},
      {"compute_dtype", std::string(DTypeName(compute_dtype))},
      {"reduce_dtype", std::string(DTypeName(reduce_dtype))}, {"lr", lr},
      {"warmup_steps", warmup_steps}, {"beta1", beta1}, {"beta2", beta2}, {"eps", eps},
      {"weight_decay", weight_decay}, {"max_grad_norm", max_grad_norm},
      {"eval_every", eval_every}, {"eval_batches", eval_batches}, {"log_path", log_path},
      {"sample_every", sample_every}, {"sample_tokens", sample_tokens},
      {"sample_prompt", sample_prompt},
      {"threads", threads}, {"device", device}, {"backend", backend}, {"checkpoint_dir", checkpoint_dir},
      {"checkpoint_every", checkpoint_every}, {"resume", resume}, {"resume_step", resume_step},
      {"collective_timeout_s", collective_timeout_s},
      {"checkpoint_timeout_s", checkpoint_timeout_s}, {"rpc_timeout_s", rpc_timeout_s},
      {"trigger_poll_timeout_s", trigger_poll_timeout_s}, {"redundancy", redundancy},
      {"redundancy_every", redundancy_every}, {"offload_optimizer", offload_optimizer},
      {"offload_params", offload_params}, {"offload_dir", offload_dir},
      {"offload_prefetch", offload_prefetch}, {"gather_prefetch", gather_prefetch},
      {"bucket_mib", bucket_mib},
      {"max_failures", max_failures},
      {"activation_checkpointing", activation_checkpointing}};
  return j.dump();
}

namespace {

// The model's, the data's and the samples' fields into c; false for another
// key. Throws nlohmann's type errors (ParseFields catches them).
bool ParseModelAndDataField(const std::string& key, const nlohmann::json& value, JobConfig& c) {
  if (key == "model") c.model = value.get<std::string>();
  else if (key == "model_desc") c.model_desc = value.get<std::string>();
  else if (key == "init") c.init = value.get<std::string>();
  else if (key == "seq_len") c.seq_len = value.get<int>();
  else if (key == "tokenizer") c.tokenizer = value.get<std::string>();
  else if (key == "data") c.data = value.get<std::vector<std::string>>();
  else if (key == "sample_every") c.sample_every = value.get<int64_t>();
  else if (key == "sample_tokens") c.sample_tokens = value.get<int>();
  else if (key == "sample_prompt") c.sample_prompt = value.get<std::string>();
  else return false;
  return true;
}

// The fields of `text`, unvalidated (FromJson validates).
absl::StatusOr<JobConfig> ParseFields(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("job config: not a JSON object");
  }
  JobConfig c;
  try {
    for (auto& [key, value] : j.items()) {
      if (ParseModelAndDataField(key, value, c)) continue;
      if (key == "stage") c.stage = value.get<int>();
      else if (key == "steps") c.steps = value.get<int64_t>();
      else if (key == "global_batch") c.global_batch = value.get<int>();
      else if (key == "micro_batch") c.micro_batch = value.get<int>();
      else if (key == "seed") c.seed = value.get<uint64_t>();
      else if (key == "compute_dtype") { ZS_ASSIGN_OR_RETURN(c.compute_dtype, ParseDType(value.get<std::string>())); }
      else if (key == "reduce_dtype") { ZS_ASSIGN_OR_RETURN(c.reduce_dtype, ParseDType(value.get<std::string>())); }
      else if (key == "lr") c.lr = value.get<double>();
      else if (key == "warmup_steps") c.warmup_steps = value.get<int64_t>();
      else if (key == "beta1") c.beta1 = value.get<double>();
      else if (key == "beta2") c.beta2 = value.get<double>();
      else if (key == "eps") c.eps = value.get<double>();
      else if (key == "weight_decay") c.weight_decay = value.get<double>();
      else if (key == "max_grad_norm") c.max_grad_norm = value.get<double>();
      else if (key == "eval_every") c.eval_every = value.get<int64_t>();
      else if (key == "eval_batches") c.eval_batches = value.get<int>();
      else if (key == "log_path") c.log_path = value.get<std::string>();
      else if (key == "threads") c.threads = value.get<int>();
      else if (key == "device") c.device = value.get<std::string>();
      else if (key == "backend") c.backend = value.get<std::string>();
      else if (key == "checkpoint_dir") c.checkpoint_dir = value.get<std::string>();
      else if (key == "checkpoint_every") c.checkpoint_every = value.get<int64_t>();
      else if (key == "resume") c.resume = value.get<bool>();
      else if (key == "resume_step") c.resume_step = value.get<int64_t>();
      else if (key == "collective_timeout_s") c.collective_timeout_s = value.get<double>();
      else if (key == "checkpoint_timeout_s") c.checkpoint_timeout_s = value.get<double>();
      else if (key == "rpc_timeout_s") c.rpc_timeout_s = value.get<double>();
      else if (key == "trigger_poll_timeout_s") c.trigger_poll_timeout_s = value.get<double>();
      else if (key == "redundancy") c.redundancy = value.get<int>();
      else if (key == "redundancy_every") c.redundancy_every = value.get<int64_t>();
      else if (key == "max_failures") c.max_failures = value.get<int64_t>();
      else if (key == "offload_optimizer") c.offload_optimizer = value.get<std::string>();
      else if (key == "offload_params") c.offload_params = value.get<std::string>();
      else if (key == "offload_dir") c.offload_dir = value.get<std::string>();
      else if (key == "offload_prefetch") c.offload_prefetch = value.get<int>();
      else if (key == "gather_prefetch") c.gather_prefetch = value.get<int>();
      else if (key == "bucket_mib") c.bucket_mib = value.get<double>();
      else if (key == "activation_checkpointing") c.activation_checkpointing = value.get<std::string>();
      else return absl::InvalidArgumentError(absl::StrCat("job config: unknown field '", key, "'"));
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("job config: wrong type: ", e.what()));
  }
  return c;
}

}  // namespace

absl::StatusOr<JobConfig> JobConfig::FromJson(const std::string& text) {
  ZS_ASSIGN_OR_RETURN(JobConfig c, ParseFields(text));
  ZS_RETURN_IF_ERROR(c.Validate());
  return c;
}

absl::StatusOr<std::string> PrepareServedJobConfig(const std::string& json,
                                                   const std::string& checkpoint_dir) {
  if (json.empty()) return json;
  // The coordinator's --checkpoint-dir first, so checkpoint_every without a
  // checkpoint_dir of its own is valid when the coordinator gives one.
  ZS_ASSIGN_OR_RETURN(JobConfig config, ParseFields(json));
  const bool fill = config.checkpoint_dir.empty() && !checkpoint_dir.empty();
  if (fill) config.checkpoint_dir = checkpoint_dir;
  ZS_RETURN_IF_ERROR(config.Validate());
  // The model, resolved here once: a directory's description is served.
  ZS_ASSIGN_OR_RETURN(const ModelConfig model,
                      JobModel(config.model, config.model_desc, config.seq_len));
  const bool describe = model.is_llama() && config.model_desc.empty();
  if (describe) config.model_desc = ModelConfigToJson(model);
  return fill || describe ? config.ToJson() : json;
}

double LearningRateAt(const JobConfig& c, int64_t step) {
  if (step < c.warmup_steps) return c.lr * static_cast<double>(step + 1) / c.warmup_steps;
  const double span = std::max<int64_t>(1, c.steps - c.warmup_steps);
  const double progress = std::min(1.0, (step - c.warmup_steps) / span);
  const double min_lr = c.lr / 10;
  return min_lr + 0.5 * (c.lr - min_lr) * (1 + std::cos(std::numbers::pi * progress));
}

}  // namespace zeroshard
