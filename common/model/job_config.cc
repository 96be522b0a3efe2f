#include "common/model/job_config.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>
#include <optional>
#include <string_view>
#include <type_traits>
#include <variant>

#include "absl/strings/str_cat.h"
#include "common/model/job_model.h"
#include "common/offload_config.h"
#include "common/status_macros.h"
#include "common/zero_stage.h"
#include "nlohmann/json.hpp"

namespace zeroshard {
namespace {

absl::Status OutOfRange(const char* field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("job config: ", field, " ", why));
}

// A backend that moves the device's memory.
absl::Status CheckDeviceAndBackend(DeviceChoice device, BackendChoice backend) {
  if (backend == BackendChoice::kShm && device != DeviceChoice::kCpu) {
    return OutOfRange("backend",
                      "shm moves host memory: it needs device cpu (on GPUs use nccl "
                      "or host-staged)");
  }
  if (device == DeviceChoice::kCpu &&
      (backend == BackendChoice::kNccl || backend == BackendChoice::kHostStaged)) {
    return OutOfRange("backend", absl::StrCat(std::string(WordOf(kBackendWords, backend)),
                                              " needs device cuda (or auto); on the CPU use "
                                              "gloo or shm"));
  }
  return absl::OkStatus();
}

// The fields that say how the job runs (threads, devices, checkpoints,
// redundancy, offload, collectives' sizes and timeouts).
absl::Status ValidateRunFields(const JobConfig& c) {
  if (c.threads < 1 || c.threads > 256) return OutOfRange("threads", "must be in [1, 256]");
  ZS_RETURN_IF_ERROR(CheckDeviceAndBackend(c.device, c.backend));
  if (c.checkpoint_every < 0) return OutOfRange("checkpoint_every", "must be >= 0");
  if (c.redundancy != 0 && c.redundancy != 1) return OutOfRange("redundancy", "must be 0 or 1");
  if (c.redundancy_every < 1) return OutOfRange("redundancy_every", "must be >= 1");
  if ((c.offload_optimizer == OptimizerOffload::kNvme ||
       c.offload_params == ParamsOffload::kNvme) &&
      c.offload_dir.empty()) {
    return OutOfRange("offload_dir", "is needed for nvme offload");
  }
  if (c.offload_params == ParamsOffload::kNvme && !ZeroStageOf(c.stage).shards_params) {
    return OutOfRange("offload_params", "nvme needs stage 3");
  }
  if (c.offload_prefetch < 0 || c.offload_prefetch > 64)
    return OutOfRange("offload_prefetch", "must be in [0, 64]");
  if (c.gather_prefetch < 0 || c.gather_prefetch > 64)
    return OutOfRange("gather_prefetch", "must be in [0, 64]");
  if (!(c.bucket_mib >= 0 && c.bucket_mib <= 4096))
    return OutOfRange("bucket_mib", "must be in [0, 4096]");
  if (!(c.collective_timeout_s > 0 && c.collective_timeout_s <= 3600)) {
    return OutOfRange("collective_timeout_s", "must be in (0, 3600]");
  }
  if (!(c.checkpoint_timeout_s > 0 && c.checkpoint_timeout_s <= 86400)) {
    return OutOfRange("checkpoint_timeout_s", "must be in (0, 86400]");
  }
  if (!(c.rpc_timeout_s > 0 && c.rpc_timeout_s <= 3600) ||
      !(c.trigger_poll_timeout_s > 0 && c.trigger_poll_timeout_s <= 3600)) {
    return OutOfRange("rpc_timeout_s/trigger_poll_timeout_s", "must be in (0, 3600]");
  }
  if (c.max_failures < 0 || c.max_failures > 1'000'000) {
    return OutOfRange("max_failures", absl::StrCat("= ", c.max_failures, " must be in [0, 1e6]"));
  }
  if (c.checkpoint_every > 0 && c.checkpoint_dir.empty()) {
    return OutOfRange("checkpoint_every", "needs a checkpoint_dir");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status JobConfig::Validate() const {
  if (seq_len < 0 || seq_len > (1 << 20)) return OutOfRange("seq_len", "must be in [0, 2^20]");
  if (!IsZeroStage(stage))
    return OutOfRange("stage", absl::StrCat("= ", stage, " is not 0, 1, 2 or 3"));
  if (steps < 1 || steps > 100'000'000) return OutOfRange("steps", "must be in [1, 1e8]");
  if (global_batch < 1 || global_batch > 1'000'000)
    return OutOfRange("global_batch", "must be in [1, 1e6]");
  if (micro_batch < 1 || micro_batch > 65536)
    return OutOfRange("micro_batch", "must be in [1, 65536]");
  if (compute_dtype == DType::kFp16 || reduce_dtype == DType::kFp16) {
    return OutOfRange("compute_dtype/reduce_dtype", "must be fp32 or bf16");
  }
  if (!(lr > 0 && lr < 10)) return OutOfRange("lr", "must be in (0, 10)");
  if (warmup_steps < 0) return OutOfRange("warmup_steps", "must be >= 0");
  if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
    return OutOfRange("beta1/beta2", "must be in [0, 1)");
  if (!(eps > 0)) return OutOfRange("eps", "must be > 0");
  if (!(weight_decay >= 0)) return OutOfRange("weight_decay", "must be >= 0");
  if (eval_every < 0 || eval_batches < 1)
    return OutOfRange("eval_every/eval_batches", "must be >= 0 / >= 1");
  if (sample_every < 0 || sample_tokens < 1 || sample_tokens > 4096) {
    return OutOfRange("sample_every/sample_tokens", "must be >= 0 / in [1, 4096]");
  }
  return ValidateRunFields(*this);
}

std::string JobConfig::ToJson() const {
  nlohmann::json j = {
      {"model", model},
      {"model_desc", model_desc},
      {"init", std::string(WordOf(kModelInitWords, init))},
      {"seq_len", seq_len},
      {"tokenizer", tokenizer},
      {"stage", stage},
      {"steps", steps},
      {"global_batch", global_batch},
      {"micro_batch", micro_batch},
      {"data", data},
      {"seed", seed},
      {"compute_dtype", std::string(DTypeName(compute_dtype))},
      {"reduce_dtype", std::string(DTypeName(reduce_dtype))},
      {"lr", lr},
      {"warmup_steps", warmup_steps},
      {"beta1", beta1},
      {"beta2", beta2},
      {"eps", eps},
      {"weight_decay", weight_decay},
      {"max_grad_norm", max_grad_norm},
      {"eval_every", eval_every},
      {"eval_batches", eval_batches},
      {"log_path", log_path},
      {"sample_every", sample_every},
      {"sample_tokens", sample_tokens},
      {"sample_prompt", sample_prompt},
      {"threads", threads},
      {"device", std::string(WordOf(kDeviceWords, device))},
      {"backend", std::string(WordOf(kBackendWords, backend))},
      {"checkpoint_dir", checkpoint_dir},
      {"checkpoint_every", checkpoint_every},
      {"resume", resume},
      {"resume_step", resume_step},
      {"collective_timeout_s", collective_timeout_s},
      {"checkpoint_timeout_s", checkpoint_timeout_s},
      {"rpc_timeout_s", rpc_timeout_s},
      {"trigger_poll_timeout_s", trigger_poll_timeout_s},
      {"redundancy", redundancy},
      {"redundancy_every", redundancy_every},
      {"offload_optimizer", std::string(WordOf(kOptimizerOffloadWords, offload_optimizer))},
      {"offload_params", std::string(WordOf(kParamsOffloadWords, offload_params))},
      {"offload_dir", offload_dir},
      {"offload_prefetch", offload_prefetch},
      {"gather_prefetch", gather_prefetch},
      {"bucket_mib", bucket_mib},
      {"max_failures", max_failures},
      {"activation_checkpointing",
       std::string(WordOf(kActivationCheckpointingWords, activation_checkpointing))}};
  return j.dump();
}

namespace {

// The model's, the data's and the samples' fields into c; false for another
// key. Throws nlohmann's type errors (ParseFields catches them).
bool ParseModelAndDataField(const std::string& key, const nlohmann::json& value, JobConfig& c) {
  if (key == "model")
    c.model = value.get<std::string>();
  else if (key == "model_desc")
    c.model_desc = value.get<std::string>();
  else if (key == "seq_len")
    c.seq_len = value.get<int>();
  else if (key == "tokenizer")
    c.tokenizer = value.get<std::string>();
  else if (key == "data")
    c.data = value.get<std::vector<std::string>>();
  else if (key == "sample_every")
    c.sample_every = value.get<int64_t>();
  else if (key == "sample_tokens")
    c.sample_tokens = value.get<int>();
  else if (key == "sample_prompt")
    c.sample_prompt = value.get<std::string>();
  else
    return false;
  return true;
}

// The job config's plain fields by JSON key, each a member of its type
// (value.get<T> of that type; a JSON value of another type throws).
using FieldPtr = std::variant<int JobConfig::*, int64_t JobConfig::*, uint64_t JobConfig::*,
                              double JobConfig::*, bool JobConfig::*, std::string JobConfig::*>;
const std::map<std::string_view, FieldPtr>& PlainFields() {
  static const auto* fields = new std::map<std::string_view, FieldPtr>{
      {"stage", &JobConfig::stage},
      {"steps", &JobConfig::steps},
      {"global_batch", &JobConfig::global_batch},
      {"micro_batch", &JobConfig::micro_batch},
      {"seed", &JobConfig::seed},
      {"lr", &JobConfig::lr},
      {"warmup_steps", &JobConfig::warmup_steps},
      {"beta1", &JobConfig::beta1},
      {"beta2", &JobConfig::beta2},
      {"eps", &JobConfig::eps},
      {"weight_decay", &JobConfig::weight_decay},
      {"max_grad_norm", &JobConfig::max_grad_norm},
      {"eval_every", &JobConfig::eval_every},
      {"eval_batches", &JobConfig::eval_batches},
      {"log_path", &JobConfig::log_path},
      {"threads", &JobConfig::threads},
      {"checkpoint_dir", &JobConfig::checkpoint_dir},
      {"checkpoint_every", &JobConfig::checkpoint_every},
      {"resume", &JobConfig::resume},
      {"resume_step", &JobConfig::resume_step},
      {"collective_timeout_s", &JobConfig::collective_timeout_s},
      {"checkpoint_timeout_s", &JobConfig::checkpoint_timeout_s},
      {"rpc_timeout_s", &JobConfig::rpc_timeout_s},
      {"trigger_poll_timeout_s", &JobConfig::trigger_poll_timeout_s},
      {"redundancy", &JobConfig::redundancy},
      {"redundancy_every", &JobConfig::redundancy_every},
      {"max_failures", &JobConfig::max_failures},
      {"offload_dir", &JobConfig::offload_dir},
      {"offload_prefetch", &JobConfig::offload_prefetch},
      {"gather_prefetch", &JobConfig::gather_prefetch},
      {"bucket_mib", &JobConfig::bucket_mib},
  };
  return *fields;
}

// `value`, a word of `words`, into `out`; INVALID_ARGUMENT naming the key
// and the words otherwise. Returns true (the key is known).
template <typename E, size_t N>
absl::StatusOr<bool> ParseWord(const char* key, const nlohmann::json& value,
                               const EnumWords<E, N>& words, E& out) {
  const std::string word = value.get<std::string>();
  const std::optional<E> v = FromWord(words, word);
  if (!v) return OutOfRange(key, absl::StrCat("= \"", word, "\" is not ", WordList(words)));
  out = *v;
  return true;
}

// The fields that are words of an enum (common/job_choices.h); false for
// another key.
absl::StatusOr<bool> ParseChoiceField(const std::string& key, const nlohmann::json& value,
                                      JobConfig& c) {
  if (key == "init") return ParseWord("init", value, kModelInitWords, c.init);
  if (key == "device") return ParseWord("device", value, kDeviceWords, c.device);
  if (key == "backend") return ParseWord("backend", value, kBackendWords, c.backend);
  if (key == "offload_optimizer") {
    return ParseWord("offload_optimizer", value, kOptimizerOffloadWords, c.offload_optimizer);
  }
  if (key == "offload_params") {
    return ParseWord("offload_params", value, kParamsOffloadWords, c.offload_params);
  }
  if (key == "activation_checkpointing") {
    return ParseWord("activation_checkpointing", value, kActivationCheckpointingWords,
                     c.activation_checkpointing);
  }
  return false;
}

// Field `key` of the job config from `value`; false for an unknown key.
// nlohmann::json's type errors propagate (ParseFields catches them).
absl::StatusOr<bool> ParseField(const std::string& key, const nlohmann::json& value, JobConfig& c) {
  if (ParseModelAndDataField(key, value, c)) return true;
  ZS_ASSIGN_OR_RETURN(const bool choice, ParseChoiceField(key, value, c));
  if (choice) return true;
  if (key == "compute_dtype" || key == "reduce_dtype") {
    ZS_ASSIGN_OR_RETURN(const DType dtype, ParseDType(value.get<std::string>()));
    (key == "compute_dtype" ? c.compute_dtype : c.reduce_dtype) = dtype;
    return true;
  }
  auto it = PlainFields().find(key);
  if (it == PlainFields().end()) return false;
  std::visit([&](auto member) { c.*member = value.get<std::decay_t<decltype(c.*member)>>(); },
             it->second);
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
      ZS_ASSIGN_OR_RETURN(const bool known, ParseField(key, value, c));
      if (!known) {
        return absl::InvalidArgumentError(absl::StrCat("job config: unknown field '", key, "'"));
      }
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
