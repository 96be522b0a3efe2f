// The llama family (common/model/model_config.h) as Hugging Face stores it: its
// parameters already carry HF's names and [out, in] layouts, so every
// tensor is written as it is; a tied model writes no lm_head.weight (HF
// ties it to model.embed_tokens.weight on load). config.json is the one the
// model was read from, with its dtype set to what the export writes.
// Thread-safe: pure functions over values.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/model/model_config.h"
#include "server/checkpoint/hf_gpt2_layout.h"

namespace zeroshard::server {

// Every parameter of ModelUnits(config), in plan order, under its own name.
std::vector<HfTensor> HfLlamaTensors(const ModelConfig& config);

// config.json for `config` (a llama-family model read from a directory):
// its hf_config_json with "dtype" (and "torch_dtype" when the file used that
// key) set to `dtype` ("float32" or "bfloat16"). FAILED_PRECONDITION when the
// description carries no config.json.
absl::StatusOr<std::string> HfLlamaConfigJson(const ModelConfig& config, const std::string& dtype);

}  // namespace zeroshard::server
