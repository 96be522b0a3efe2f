#include "server/checkpoint/hf_llama_layout.h"

#include "nlohmann/json.hpp"

namespace zeroshard::server {

std::vector<HfTensor> HfLlamaTensors(const ModelConfig& config) {
  std::vector<HfTensor> tensors;
  for (const UnitSpec& u : ModelUnits(config)) {
    for (const TensorSpec& t : u.params) tensors.push_back({t.name, t.name, t.shape, false});
  }
  return tensors;
}

absl::StatusOr<std::string> HfLlamaConfigJson(const ModelConfig& config, const std::string& dtype) {
  nlohmann::ordered_json j =
      nlohmann::ordered_json::parse(config.hf_config_json, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::FailedPreconditionError(
        "the checkpoint's model carries no Hugging Face config.json to export");
  }
  if (j.contains("torch_dtype")) j["torch_dtype"] = dtype;
  j["dtype"] = dtype;
  return j.dump(2) + "\n";
}

}  // namespace zeroshard::server
