// Consolidated export of a committed checkpoint: the fp32 master weights, one
// tensor per named parameter with its shape, in the safetensors format
// (common/safetensors.h), in zeroshard's own names and [out, in] layouts
// ("native"), or in Hugging Face GPT-2's ("hf-gpt2"). Parameters are cut from
// each unit's master file at their plan offsets; padding is dropped.
// Thread-safe: reads files only.
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

// The same checkpoint as a Hugging Face transformers GPT2LMHeadModel
// directory: `out_dir`/model.safetensors (names and Conv1D layouts of
// hf_gpt2_layout.h) and `out_dir`/config.json; `out_dir` is created when
// missing, and both files are replaced atomically. FAILED_PRECONDITION, one
// line saying why, when the checkpoint is not a zeroshard reference model
// (model config without a preset, or a plan that differs from the preset's
// units); NOT_FOUND for an unknown preset; otherwise errors as
// ExportSafetensors. `bytes` counts tensor data written.
absl::StatusOr<ExportResult> ExportHfGpt2(const std::string& checkpoint_path,
                                          const std::string& out_dir);

}  // namespace zeroshard::server
