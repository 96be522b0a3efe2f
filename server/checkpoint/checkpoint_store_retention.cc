// CheckpointStore's retention (checkpoint_store.h, keep_last): the oldest
// committed checkpoints beyond the limit are renamed out of sight under the
// store's lock and freed by the background reaper after it.
#include <unistd.h>

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "server/checkpoint/checkpoint_files.h"
#include "server/checkpoint/checkpoint_store.h"
#include "server/checkpoint/checkpoint_store_internal.h"

namespace zeroshard::server {
namespace fs = std::filesystem;

namespace {

// Deletes a committed checkpoint: manifest first, so a crash midway leaves a
// partial directory that the next Open removes.
void DeleteCommittedDir(const std::string& dir) {
  ::unlink((fs::path(dir) / kManifestName).c_str());
  (void)FsyncPath(dir);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace

std::vector<std::string> CheckpointStore::ApplyRetention() {
  std::vector<std::string> retired;
  if (options_.keep_last <= 0) return retired;
  while (committed_.size() > static_cast<size_t>(options_.keep_last)) {
    auto oldest = committed_.begin();
    // Out of sight at once under the pending prefix (the next Open removes
    // such a directory); the reaper frees its bytes in the background.
    const std::string& dir = oldest->second->dir;
    const std::string out_of_sight =
        (fs::path(options_.dir) /
         absl::StrCat(kPendingPrefix, "retired-", fs::path(dir).filename().string()))
            .string();
    if (::rename(dir.c_str(), out_of_sight.c_str()) == 0) {
      retired.push_back(out_of_sight);
    } else {
      DeleteCommittedDir(dir);
    }
    committed_.erase(oldest);
  }
  return retired;
}

void CheckpointStore::Reap(std::vector<std::string> retired) {
  if (retired.empty()) return;
  (void)FsyncPath(options_.dir);  // The renames; a crash before it keeps them listed, still valid.
  for (std::string& dir : retired) reaper_.Remove(std::move(dir));
}

}  // namespace zeroshard::server
