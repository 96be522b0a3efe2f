// ExportHfGpt2 (checkpoint_export.h): the checkpoint's master weights under
// the names and layouts of hf_gpt2_layout.h, plus config.json.
#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/safetensors.h"
#include "common/status_macros.h"
#include "server/checkpoint/checkpoint_export.h"
#include "server/checkpoint/checkpoint_files.h"
#include "server/checkpoint/checkpoint_manifest.h"
#include "server/checkpoint/hf_gpt2_layout.h"

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

}  // namespace

absl::StatusOr<ExportResult> ExportHfGpt2(const std::string& checkpoint_path,
                                          const std::string& out_dir) {
  ZS_ASSIGN_OR_RETURN(std::string dir, ResolveCheckpointDir(checkpoint_path));
  ZS_ASSIGN_OR_RETURN(LoadedManifest m, LoadManifest(dir, /*verify_hashes=*/true));
  absl::StatusOr<ModelConfig> config = ModelConfigOfJob(m.manifest.model_config_json());
  absl::Status fits = config.ok() ? CheckPlanIsModel(m.plan, *config) : config.status();
  if (!fits.ok()) {
    return absl::Status(fits.code(), absl::StrCat(dir, " cannot be exported as hf-gpt2: ",
                                                  fits.message()));
  }
  std::map<std::string, std::string> master_file;  // Unit -> file path.
  for (const v1::CheckpointFile& f : m.manifest.files()) {
    if (f.kind() == v1::TENSOR_KIND_MASTER) master_file[f.unit()] = dir + "/" + f.path();
  }
  std::map<std::string, Source> sources;  // zeroshard parameter name -> its values.
  for (const UnitPlan& u : m.plan.units) {
    for (const ParamPlacement& p : u.params) {
      sources[p.name] = {master_file.at(u.name), p.offset, p.shape, p.numel};
    }
  }
  const std::vector<HfTensor> tensors = HfGpt2Tensors(*config);
  std::vector<SafetensorsEntry> entries;
  for (const HfTensor& t : tensors) entries.push_back({t.hf_name, t.shape});
  ExportResult out{dir, m.manifest.summary().step(), static_cast<int64_t>(entries.size()), 0};
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},  // transformers reads safetensors files marked "pt".
      {"zeroshard_job_id", m.manifest.summary().job_id()},
      {"zeroshard_step", std::to_string(out.step)},
      {"zeroshard_checkpoint", m.manifest.summary().checkpoint_id()}};
  ZS_RETURN_IF_ERROR(MakeDirectories(out_dir));
  std::vector<float> scratch;
  ZS_RETURN_IF_ERROR(WriteSafetensors(
      out_dir + "/model.safetensors", entries, metadata, [&](size_t i, float* dst) {
        const HfTensor& t = tensors[i];
        const Source& s = sources.at(t.source);  // CheckPlanIsModel: present.
        out.bytes += s.numel * 4;
        if (!t.transpose) return ReadSource(s, dst);
        scratch.resize(s.numel);
        ZS_RETURN_IF_ERROR(ReadSource(s, scratch.data()));
        TransposeInto(scratch.data(), s.shape[0], s.shape[1], dst);
        return absl::OkStatus();
      }));
  ZS_RETURN_IF_ERROR(WriteFileAtomically(out_dir + "/config.json", HfGpt2ConfigJson(*config)));
  return out;
}

}  // namespace zeroshard::server
