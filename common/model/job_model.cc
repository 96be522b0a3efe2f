#include "common/model/job_model.h"

#include "common/model/hf_model_config.h"

namespace zeroshard {

absl::StatusOr<ModelConfig> ResolveModel(const std::string& model, int seq_len) {
  if (IsHfModelDir(model)) return ReadHfModelConfig(model, seq_len);
  return ModelPreset(model);
}

absl::StatusOr<ModelConfig> JobModel(const std::string& model, const std::string& model_desc,
                                     int seq_len) {
  if (!model_desc.empty()) return ModelConfigFromJson(model_desc);
  return ResolveModel(model, seq_len);
}

}  // namespace zeroshard
