// Test helper: zeroshard's own forward (worker/model CreateCausalLm: GptModel
// or LlamaModel on the CPU kernels) over a committed checkpoint's master
// weights, writing the LM
// head's logits, so a test can compare another implementation's on the same
// weights. Reads the checkpoint's unit files itself (by the manifest's plan,
// parameter by parameter); it does not use any export code.
//
// Usage: gpt_logits_tool --checkpoint DIR [--model PRESET] --tokens FILE
//                        --batch B --out FILE
//   PRESET  the model; default: the one the checkpoint's job config
//           describes (server/checkpoint ModelConfigOfJob);
//   DIR     a checkpoint dir (its latest committed checkpoint) or one
//           checkpoint's dir;
//   tokens  little-endian int32 [B, T] (T = size / (4 B));
//   out     written: little-endian float32 logits [B, T, vocab].
// Exit codes: 0 done, 1 failure (one line on stderr), 2 usage.
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/formats/atomic_file.h"
#include "common/infra/cli.h"
#include "common/status_macros.h"
#include "server/checkpoint/checkpoint_files.h"
#include "server/checkpoint/checkpoint_manifest.h"
#include "server/checkpoint/hf_gpt2_layout.h"
#include "worker/model/causal_lm.h"
#include "worker/model/local_params.h"

namespace zeroshard {
namespace {

struct Flags {
  std::string checkpoint, model, tokens, out;
  int batch = 1;
};

// One full buffer per model unit (world-size-1 plan), each parameter copied
// from where the checkpoint's plan put it.
absl::StatusOr<std::vector<std::vector<float>>> LoadUnits(const server::LoadedManifest& m,
                                                          const ModelConfig& config) {
  const std::string& dir = m.dir;
  ZS_ASSIGN_OR_RETURN(ShardPlan mine, MakeShardPlan(ModelUnits(config), 1, 1));
  std::vector<std::vector<float>> units;
  for (const UnitPlan& u : mine.units) {
    std::vector<float> buf(u.padded_numel, 0.0f);
    const UnitPlan* theirs = m.plan.FindUnit(u.name);
    if (theirs == nullptr) return absl::NotFoundError("checkpoint lacks unit " + u.name);
    std::string file;
    for (const v1::CheckpointFile& f : m.manifest.files()) {
      if (f.kind() == v1::TENSOR_KIND_MASTER && f.unit() == u.name) file = dir + "/" + f.path();
    }
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(errno, "open", file);
    absl::Status st;
    for (const ParamPlacement& p : u.params) {
      const ParamPlacement* src = nullptr;
      for (const ParamPlacement& q : theirs->params) src = q.name == p.name ? &q : src;
      if (src == nullptr || src->shape != p.shape) {
        st = absl::NotFoundError("checkpoint lacks " + p.name + " in the model's shape");
        break;
      }
      st = PReadFull(fd, buf.data() + p.offset, p.numel * 4, src->offset * 4, file);
      if (!st.ok()) break;
    }
    ::close(fd);
    ZS_RETURN_IF_ERROR(st);
    units.push_back(std::move(buf));
  }
  return units;
}

absl::Status Run(const Flags& f) {
  ZS_ASSIGN_OR_RETURN(std::string dir, server::ResolveCheckpointDir(f.checkpoint));
  ZS_ASSIGN_OR_RETURN(server::LoadedManifest m,
                      server::LoadManifest(dir, server::HashCheck::kWhole));
  ZS_ASSIGN_OR_RETURN(ModelConfig config,
                      f.model.empty() ? server::ModelConfigOfJob(m.manifest.model_config_json())
                                      : ModelPreset(f.model));
  ZS_ASSIGN_OR_RETURN(std::vector<std::vector<float>> units, LoadUnits(m, config));
  ZS_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(f.tokens));
  if (bytes.empty() || bytes.size() % (4 * f.batch) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(f.tokens, ": ", bytes.size(), " bytes is not int32 [", f.batch, ", T]"));
  }
  std::vector<int32_t> tokens(bytes.size() / 4);
  std::memcpy(tokens.data(), bytes.data(), bytes.size());
  const int T = static_cast<int>(tokens.size() / f.batch);
  LocalParams params(std::move(units));
  std::unique_ptr<CausalLm> model = CreateCausalLm(config);
  std::vector<float> logits;
  ZS_RETURN_IF_ERROR(model->Logits(tokens.data(), f.batch, T, params, &logits));
  return WriteFileAtomically(
      f.out, std::string(reinterpret_cast<const char*>(logits.data()), logits.size() * 4));
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  zeroshard::Flags f;
  CLI::App app{"zeroshard's forward over a checkpoint: logits to a file", "gpt_logits_tool"};
  app.add_option("--checkpoint", f.checkpoint, "checkpoint dir or one checkpoint's dir")
      ->required();
  app.add_option("--model", f.model, "model preset the checkpoint holds (default: its job's)");
  app.add_option("--tokens", f.tokens, "int32 [B, T] token ids")->required();
  app.add_option("--batch", f.batch, "B")->check(CLI::Range(1, 1 << 20));
  app.add_option("--out", f.out, "float32 [B, T, vocab] logits (written)")->required();
  if (auto code = zeroshard::ParseCommandLine(app, argc, argv)) return *code;
  const absl::Status st = zeroshard::Run(f);
  if (!st.ok()) {
    std::cerr << "gpt_logits_tool: " << st.message() << "\n";
    return 1;
  }
  return 0;
}
