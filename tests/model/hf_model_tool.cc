// Test helper: zeroshard's llama-family model (LlamaModel on the CPU
// kernels) over a Hugging Face model directory read by zeroshard's own
// loaders (common/model/hf_model_config.h, common/formats/hf_weights.h), writing what a
// test compares with transformers on the same weights and tokens.
//
// Usage: hf_model_tool --model DIR --tokens FILE --batch B --out FILE
//                      [--head-chunk N] [--seq-len T]
//   tokens  little-endian int32 [B, T + 1]: inputs are [:, :T], targets
//           [:, 1:];
//   out     safetensors (F32): "logits" [B, T, V]; "loss" [1], the mean
//           cross-entropy over the B T targets; "grad.<name>" for every
//           parameter (HF names), the gradient of that mean loss.
// Exit codes: 0 done, 1 failure (one line on stderr), 2 usage.
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/formats/hf_weights.h"
#include "common/formats/safetensors.h"
#include "common/infra/cli.h"
#include "common/model/hf_model_config.h"
#include "common/status_macros.h"
#include "worker/model/llama_model.h"
#include "worker/model/local_params.h"

namespace zeroshard {
namespace {

struct Flags {
  std::string model, tokens, out;
  int batch = 1, head_chunk = 0, seq_len = 0;
};

absl::StatusOr<std::vector<int32_t>> ReadTokens(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::vector<int32_t> t(static_cast<size_t>(in.tellg()) / 4);
  in.seekg(0);
  in.read(reinterpret_cast<char*>(t.data()), static_cast<std::streamsize>(t.size() * 4));
  return t;
}

absl::Status Run(const Flags& f) {
  ZS_ASSIGN_OR_RETURN(const std::vector<int32_t> tokens, ReadTokens(f.tokens));
  const int B = f.batch, T = static_cast<int>(tokens.size() / B) - 1;
  ZS_ASSIGN_OR_RETURN(const ModelConfig config,
                      ReadHfModelConfig(f.model, f.seq_len > 0 ? f.seq_len : T));
  ZS_ASSIGN_OR_RETURN(const HfWeights weights, HfWeights::Open(f.model));
  const std::vector<UnitSpec> specs = ModelUnits(config);
  ZS_RETURN_IF_ERROR(weights.CheckUnits(specs));
  ZS_ASSIGN_OR_RETURN(const ShardPlan plan, MakeShardPlan(specs, 1, 1));
  ZS_ASSIGN_OR_RETURN(std::vector<std::vector<float>> units, weights.ReadWholeUnits(plan));
  std::vector<int32_t> inputs, targets;
  for (int b = 0; b < B; ++b) {
    const int32_t* row = tokens.data() + int64_t{b} * (T + 1);
    inputs.insert(inputs.end(), row, row + T);
    targets.insert(targets.end(), row + 1, row + T + 1);
  }
  LocalParams params(std::move(units));
  LlamaModel model(config, ActivationCheckpointing::kNone, CpuKernels(), nullptr, f.head_chunk);
  std::vector<float> logits;
  ZS_RETURN_IF_ERROR(model.Logits(inputs.data(), B, T, params, &logits));
  const float scale = 1.0f / static_cast<float>(B * T);
  ZS_ASSIGN_OR_RETURN(const double sum,
                      model.ForwardBackward(inputs.data(), targets.data(), B, T, scale, params));
  std::vector<SafetensorsEntry> entries = {{"logits", {B, T, config.vocab}}, {"loss", {1}}};
  std::vector<const float*> sources = {logits.data(), nullptr};
  const float loss = static_cast<float>(sum / (B * T));
  for (size_t u = 0; u < plan.units.size(); ++u) {
    for (const ParamPlacement& p : plan.units[u].params) {
      entries.push_back({"grad." + p.name, p.shape});
      sources.push_back(params.grads(static_cast<int>(u)).data() + p.offset);
    }
  }
  return WriteSafetensors(f.out, entries, {}, [&](size_t i, float* dst) {
    int64_t n = 1;
    for (int64_t d : entries[i].shape) n *= d;
    if (sources[i] == nullptr) {
      dst[0] = loss;
    } else {
      std::copy(sources[i], sources[i] + n, dst);
    }
    return absl::OkStatus();
  });
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  zeroshard::Flags f;
  CLI::App app{"zeroshard's llama-family model over a Hugging Face directory", "hf_model_tool"};
  app.add_option("--model", f.model)->required();
  app.add_option("--tokens", f.tokens)->required();
  app.add_option("--out", f.out)->required();
  app.add_option("--batch", f.batch)->check(CLI::PositiveNumber);
  app.add_option("--head-chunk", f.head_chunk);
  app.add_option("--seq-len", f.seq_len);
  if (auto code = zeroshard::ParseCommandLine(app, argc, argv)) return *code;
  const absl::Status s = zeroshard::Run(f);
  if (!s.ok()) {
    std::cerr << "hf_model_tool: " << s.message() << "\n";
    return s.code() == absl::StatusCode::kInvalidArgument ||
                   s.code() == absl::StatusCode::kFailedPrecondition
               ? 2
               : 1;
  }
  return 0;
}
