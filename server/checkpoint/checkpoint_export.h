// Consolidated export of a committed checkpoint: the fp32 master weights, one
// tensor per named parameter with its shape, in the safetensors format
// (common/safetensors.h). Parameters are cut from each unit's master file at
// their plan offsets; padding is dropped. Thread-safe: reads files only.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace zeroshard::server {

struct ExportResult {
  std::string checkpoint_dir;  // The checkpoint exported.
  int64_t step = 0;
  int64_t tensors = 0;
  int64_t bytes = 0;  // Tensor data bytes written.
};

// `checkpoint_path`: a checkpoint's own directory, or a checkpoint dir
// (meaning its latest committed checkpoint). The manifest is checked against
// its files, hashes included, before anything is written (DATA_LOSS if they
// do not match; NOT_FOUND if there is no committed checkpoint).
absl::StatusOr<ExportResult> ExportSafetensors(const std::string& checkpoint_path,
                                               const std::string& out_path);

}  // namespace zeroshard::server
