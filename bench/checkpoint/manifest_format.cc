#include "bench/checkpoint/manifest_format.h"

#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "server/checkpoint/checkpoint_files.h"
#include "server/checkpoint/checkpoint_manifest.h"

namespace zeroshard::bench {

void StripBlockHashes(const std::string& store_dir, int64_t step) {
  const std::string dir = store_dir + "/" + server::CheckpointIdForStep(step);
  absl::StatusOr<server::LoadedManifest> m = server::LoadManifest(dir, server::HashCheck::kNone);
  absl::Status st = m.status();
  if (st.ok()) {
    for (v1::CheckpointFile& f : *m->manifest.mutable_files()) {
      f.clear_block_bytes();
      f.clear_block_xxhash64();
    }
    absl::StatusOr<std::string> json = server::ManifestToJson(m->manifest);
    st = json.ok() ? server::WriteFileAtomic(dir + "/" + server::kManifestName, *json)
                   : json.status();
  }
  if (!st.ok()) {
    std::fprintf(stderr, "checkpoint_bench: stripping block hashes in %s: %s\n", dir.c_str(),
                 st.ToString().c_str());
    std::exit(1);
  }
}

}  // namespace zeroshard::bench
