#include "server/checkpoint/checkpoint_export.h"

#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/formats/safetensors.h"
#include "common/status_macros.h"
#include "server/checkpoint/checkpoint_files.h"
#include "server/checkpoint/checkpoint_manifest.h"

namespace zeroshard::server {

absl::StatusOr<ExportResult> ExportSafetensors(const std::string& checkpoint_path,
                                               const std::string& out_path) {
  ZS_ASSIGN_OR_RETURN(std::string dir, ResolveCheckpointDir(checkpoint_path));
  ZS_ASSIGN_OR_RETURN(LoadedManifest m, LoadManifest(dir, HashCheck::kWhole));
  std::map<std::string, std::string> master_file;  // Unit -> file path.
  for (const v1::CheckpointFile& f : m.manifest.files()) {
    if (f.kind() == v1::TENSOR_KIND_MASTER) master_file[f.unit()] = dir + "/" + f.path();
  }
  struct Source {
    std::string file;
    int64_t offset;  // Elements into the unit.
    int64_t numel;
  };
  std::vector<SafetensorsEntry> entries;
  std::vector<Source> sources;
  for (const UnitPlan& u : m.plan.units) {
    for (const ParamPlacement& p : u.params) {
      entries.push_back({p.name, p.shape});
      sources.push_back({master_file.at(u.name), p.offset, p.numel});
    }
  }
  ExportResult out{dir, m.manifest.summary().step(), static_cast<int64_t>(entries.size()), 0};
  const std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"zeroshard_job_id", m.manifest.summary().job_id()},
      {"zeroshard_step", std::to_string(out.step)},
      {"zeroshard_checkpoint", m.manifest.summary().checkpoint_id()}};
  ZS_RETURN_IF_ERROR(WriteSafetensors(out_path, entries, metadata, [&](size_t i, float* dst) {
    const Source& s = sources[i];
    int fd = ::open(s.file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(errno, "open", s.file);
    absl::Status st = PReadFull(fd, dst, s.numel * 4, s.offset * 4, s.file);
    ::close(fd);
    out.bytes += s.numel * 4;
    return st;
  }));
  return out;
}

}  // namespace zeroshard::server
