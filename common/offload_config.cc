#include "common/offload_config.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/zero_stage.h"

namespace zeroshard {

absl::Status CheckOffloadDir(const std::string& dir, int64_t bytes_needed) {
  if (dir.empty()) return absl::InvalidArgumentError("--offload-dir is needed for nvme offload");
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat("--offload-dir ", dir, " is not an existing directory"));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("--offload-dir ", dir, " is not writable"));
  }
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) != 0) {
    return absl::NotFoundError(absl::StrCat("--offload-dir ", dir, ": cannot read free space"));
  }
  const int64_t free_bytes = static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
  if (free_bytes < bytes_needed) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("--offload-dir %s has %.3f GiB free, offload needs %.3f GiB", dir,
                        free_bytes / 1073741824.0, bytes_needed / 1073741824.0));
  }
  return absl::OkStatus();
}

int64_t OffloadBytesNeeded(int64_t psi, int stage, int ranks, bool optimizer, bool params,
                           int compute_bytes, int units) {
  int64_t bytes = 0;
  if (optimizer) bytes += 12 * psi * (ZeroStageOf(stage).shards_optimizer ? 1 : ranks);
  if (params) bytes += static_cast<int64_t>(compute_bytes) * psi;
  return bytes + int64_t{4096} * 3 * units * ranks;
}

}  // namespace zeroshard
