// Consolidated export of a committed checkpoint: the fp32 master weights, one
// tensor per named parameter with its shape, in the safetensors format
// (common/formats/safetensors.h), in zeroshard's own names and [out, in] layouts
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
  int64_t files = 1;  // Safetensors files written (hf: shards).
};

// How ExportHf writes: fp32 or bf16 (rounded to nearest even), and the
// largest safetensors file before it splits into shards with an index
// (transformers' max_shard_size; its default, 5 GB).
struct HfExportOptions {
  bool bf16 = false;
  int64_t max_shard_bytes = 5'000'000'000;
};

// `checkpoint_path`: a checkpoint's own directory, or a checkpoint dir
// (meaning its latest committed checkpoint). The manifest is checked against
// its files, hashes included, before anything is written (DATA_LOSS if they
// do not match; NOT_FOUND if there is no committed checkpoint).
absl::StatusOr<ExportResult> ExportSafetensors(const std::string& checkpoint_path,
                                               const std::string& out_path);

// The same checkpoint as a Hugging Face transformers model directory that
// AutoModelForCausalLM.from_pretrained loads with no missing or unexpected
// keys: the gpt2 family as GPT2LMHeadModel (hf_gpt2_layout.h), the llama
// family as the class its config.json names (hf_llama_layout.h).
// `out_dir`/model.safetensors, or model-0000i-of-0000N.safetensors and
// model.safetensors.index.json past `options.max_shard_bytes`, and
// config.json; each file is replaced atomically, and weight files an
// earlier export left there are removed. Memory: one tensor at a time.
// FAILED_PRECONDITION, one line saying why, when the checkpoint is not the
// model its job config describes; otherwise errors as ExportSafetensors.
absl::StatusOr<ExportResult> ExportHf(const std::string& checkpoint_path,
                                      const std::string& out_dir, const HfExportOptions& options);

// ExportHf in fp32, one file (the older --format hf-gpt2).
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
