// ExportHf (checkpoint_export.h): the checkpoint's master weights under the
// names and layouts of the model's Hugging Face class (hf_gpt2_layout.h,
// hf_llama_layout.h), in safetensors shards of at most max_shard_bytes with
// an index when there are several, plus config.json. One tensor's values
// are in memory at a time.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/formats/atomic_file.h"
#include "common/formats/safetensors.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "server/checkpoint/checkpoint_export.h"
#include "server/checkpoint/checkpoint_files.h"
#include "server/checkpoint/checkpoint_manifest.h"
#include "server/checkpoint/hf_gpt2_layout.h"
#include "server/checkpoint/hf_llama_layout.h"

namespace zeroshard::server {
namespace {

// Where one zeroshard parameter's values lie in the checkpoint.
struct Source {
  std::string file;  // The unit's master file.
  int64_t offset;    // Elements into the unit.
  std::vector<int64_t> shape;
  int64_t numel;
};

absl::Status ReadSource(const Source& s, float* dst) {
  int fd = ::open(s.file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open", s.file);
  absl::Status st = PReadFull(fd, dst, s.numel * 4, s.offset * 4, s.file);
  ::close(fd);
  return st;
}

std::map<std::string, Source> Sources(const LoadedManifest& m) {
  std::map<std::string, std::string> master_file;  // Unit -> file path.
  for (const v1::CheckpointFile& f : m.manifest.files()) {
    if (f.kind() == v1::TENSOR_KIND_MASTER) master_file[f.unit()] = m.dir + "/" + f.path();
  }
  std::map<std::string, Source> sources;  // zeroshard parameter name -> its values.
  for (const UnitPlan& u : m.plan.units) {
    for (const ParamPlacement& p : u.params) {
      sources[p.name] = {master_file.at(u.name), p.offset, p.shape, p.numel};
    }
  }
  return sources;
}

// Consecutive tensors, in order, into files of at most `max_bytes` each (a
// tensor larger than that alone in its file).
std::vector<std::vector<size_t>> Shards(const std::vector<HfTensor>& tensors, int64_t esize,
                                        int64_t max_bytes) {
  std::vector<std::vector<size_t>> shards;
  int64_t bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    int64_t n = esize;
    for (int64_t d : tensors[i].shape) n *= d;
    if (shards.empty() || (bytes + n > max_bytes && !shards.back().empty())) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back().push_back(i);
    bytes += n;
  }
  return shards;
}

// Files an earlier export left that this one does not write would shadow
// it (transformers reads model.safetensors before an index): removed.
void RemoveStaleWeights(const std::string& out_dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(out_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("model", 0) == 0 &&
        (name.ends_with(".safetensors") || name == "model.safetensors.index.json")) {
      std::filesystem::remove(e.path(), ec);
    }
  }
}

struct Plan {
  std::vector<HfTensor> tensors;
  std::string config_json;
};

absl::StatusOr<Plan> PlanExport(const ModelConfig& model, bool bf16) {
  Plan p;
  if (model.is_llama()) {
    p.tensors = HfLlamaTensors(model);
    ZS_ASSIGN_OR_RETURN(p.config_json, HfLlamaConfigJson(model, bf16 ? "bfloat16" : "float32"));
  } else {
    p.tensors = HfGpt2Tensors(model);
    nlohmann::json j = nlohmann::json::parse(HfGpt2ConfigJson(model));
    j["dtype"] = bf16 ? "bfloat16" : "float32";
    p.config_json = j.dump(2) + "\n";
  }
  return p;
}

}  // namespace

absl::StatusOr<ExportResult> ExportHf(const std::string& checkpoint_path,
                                      const std::string& out_dir, const HfExportOptions& o) {
  if (o.max_shard_bytes < 1) return absl::InvalidArgumentError("--max-shard-size must be > 0");
  ZS_ASSIGN_OR_RETURN(std::string dir, ResolveCheckpointDir(checkpoint_path));
  ZS_ASSIGN_OR_RETURN(LoadedManifest m, LoadManifest(dir, HashCheck::kWhole));
  absl::StatusOr<ModelConfig> config = ModelConfigOfJob(m.manifest.model_config_json());
  absl::Status fits = config.ok() ? CheckPlanIsModel(m.plan, *config) : config.status();
  absl::StatusOr<Plan> plan = fits.ok() ? PlanExport(*config, o.bf16) : fits;
  if (!plan.ok()) {
    return absl::Status(plan.status().code(),
                        absl::StrCat(dir, " cannot be exported as hf: ", plan.status().message()));
  }
  const std::map<std::string, Source> sources = Sources(m);
  const std::vector<std::vector<size_t>> shards =
      Shards(plan->tensors, o.bf16 ? 2 : 4, o.max_shard_bytes);
  ExportResult out{dir, m.manifest.summary().step(), static_cast<int64_t>(plan->tensors.size()), 0};
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},  // transformers reads safetensors files marked "pt".
      {"zeroshard_job_id", m.manifest.summary().job_id()},
      {"zeroshard_step", std::to_string(out.step)},
      {"zeroshard_checkpoint", m.manifest.summary().checkpoint_id()}};
  ZS_RETURN_IF_ERROR(MakeDirectories(out_dir));
  RemoveStaleWeights(out_dir);
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  std::vector<float> scratch;
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string file = shards.size() == 1 ? "model.safetensors"
                                                : absl::StrFormat("model-%05d-of-%05d.safetensors",
                                                                  s + 1, shards.size());
    std::vector<SafetensorsEntry> entries;
    for (size_t i : shards[s]) {
      entries.push_back(
          {plan->tensors[i].hf_name, plan->tensors[i].shape, o.bf16 ? "BF16" : "F32"});
      weight_map[plan->tensors[i].hf_name] = file;
    }
    ZS_RETURN_IF_ERROR(
        WriteSafetensors(out_dir + "/" + file, entries, metadata, [&](size_t k, float* dst) {
          const HfTensor& t = plan->tensors[shards[s][k]];
          const Source& src = sources.at(t.source);  // CheckPlanIsModel: present.
          out.bytes += src.numel * (o.bf16 ? 2 : 4);
          if (!t.transpose) return ReadSource(src, dst);
          scratch.resize(src.numel);
          ZS_RETURN_IF_ERROR(ReadSource(src, scratch.data()));
          TransposeInto(scratch.data(), src.shape[0], src.shape[1], dst);
          return absl::OkStatus();
        }));
  }
  if (shards.size() > 1) {
    const nlohmann::ordered_json index = {{"metadata", {{"total_size", out.bytes}}},
                                          {"weight_map", weight_map}};
    ZS_RETURN_IF_ERROR(
        WriteFileAtomically(out_dir + "/model.safetensors.index.json", index.dump(2) + "\n"));
  }
  out.files = static_cast<int64_t>(shards.size());
  ZS_RETURN_IF_ERROR(WriteFileAtomically(out_dir + "/config.json", plan->config_json));
  return out;
}

absl::StatusOr<ExportResult> ExportHfGpt2(const std::string& checkpoint_path,
                                          const std::string& out_dir) {
  return ExportHf(checkpoint_path, out_dir, HfExportOptions{});
}

}  // namespace zeroshard::server
