// A committed checkpoint's model, whole, in memory: its description (from
// the job config the manifest carries) and every unit's fp32 master weights,
// padding included, in ModelUnits order, as a single process needs them to
// run the model (`zeroshard generate --checkpoint`).
// Thread-safe: reads files only.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/job_config.h"
#include "common/model/model_config.h"

namespace zeroshard::server {

struct CheckpointModel {
  JobConfig job;  // The job that saved it (its model, tokenizer, ...).
  ModelConfig config;
  std::vector<std::vector<float>> units;
};

// `checkpoint_path` as ExportHf takes it. The manifest is checked against
// its files, hashes included (DATA_LOSS naming the mismatch); NOT_FOUND
// without a committed checkpoint; FAILED_PRECONDITION when the checkpoint's
// plan is not its job's model.
absl::StatusOr<CheckpointModel> ReadCheckpointModel(const std::string& checkpoint_path);

}  // namespace zeroshard::server
