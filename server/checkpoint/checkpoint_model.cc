#include "server/checkpoint/checkpoint_model.h"

#include <fcntl.h>
#include <unistd.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/checkpoint/checkpoint_files.h"
#include "server/checkpoint/checkpoint_manifest.h"
#include "server/checkpoint/hf_gpt2_layout.h"

namespace zeroshard::server {

absl::StatusOr<CheckpointModel> ReadCheckpointModel(const std::string& checkpoint_path) {
  ZS_ASSIGN_OR_RETURN(const std::string dir, ResolveCheckpointDir(checkpoint_path));
  ZS_ASSIGN_OR_RETURN(const LoadedManifest m, LoadManifest(dir, HashCheck::kWhole));
  CheckpointModel out;
  ZS_ASSIGN_OR_RETURN(out.job, JobConfig::FromJson(m.manifest.model_config_json()));
  ZS_ASSIGN_OR_RETURN(out.config, ModelConfigOfJob(m.manifest.model_config_json()));
  ZS_RETURN_IF_ERROR(CheckPlanIsModel(m.plan, out.config));
  std::map<std::string, std::string> master;  // Unit -> file.
  for (const v1::CheckpointFile& f : m.manifest.files()) {
    if (f.kind() == v1::TENSOR_KIND_MASTER) master[f.unit()] = dir + "/" + f.path();
  }
  for (const UnitPlan& u : m.plan.units) {
    std::vector<float> buf(u.padded_numel);
    const std::string& file = master.at(u.name);
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(errno, "open", file);
    const absl::Status s = PReadFull(fd, buf.data(), u.padded_numel * 4, 0, file);
    ::close(fd);
    ZS_RETURN_IF_ERROR(s);
    out.units.push_back(std::move(buf));
  }
  return out;
}

}  // namespace zeroshard::server
