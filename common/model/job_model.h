// The model a job names (JobConfig::model): a preset name (gpt2 family) or
// a Hugging Face model directory (hf_model_config.h), resolved the same way
// by `zeroshard launch`, `zeroshard plan` and the coordinator. Workers never
// resolve it themselves: they read the description the coordinator serves
// (JobConfig::model_desc), since in a cluster only the coordinator mounts
// the model directory.
// Thread-safe: reads files only.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "common/model/model_config.h"

namespace zeroshard {

// `model`: a preset or a directory holding config.json. `seq_len` > 0: the
// context a directory's model trains on (default: kDefaultHfContext or
// max_position_embeddings, the smaller); a preset's context is its own
// (`seq_len` ignored). Errors: the preset's NOT_FOUND; the config's
// INVALID_ARGUMENT naming the key.
absl::StatusOr<ModelConfig> ResolveModel(const std::string& model, int seq_len = 0);

// The model of a job as a worker knows it: `model_desc` when the job
// carries one (ModelConfigFromJson), else ResolveModel(model, seq_len).
absl::StatusOr<ModelConfig> JobModel(const std::string& model, const std::string& model_desc,
                                     int seq_len);

}  // namespace zeroshard
