// Rewrites a committed checkpoint's manifest in the format before block
// hashes (CheckpointFile.block_bytes / block_xxhash64 cleared), so
// checkpoint_bench can measure, in the same run, the restore a restarted
// service gave such a checkpoint: the whole files read and hashed on first
// access, then read again to be served.
#pragma once

#include <cstdint>
#include <string>

namespace zeroshard::bench {

// The checkpoint of `step` in the store directory `store_dir`, through the
// store's own manifest reader and writer. Exits the process with the reason
// on any error (a bench helper).
void StripBlockHashes(const std::string& store_dir, int64_t step);

}  // namespace zeroshard::bench
