// Rewrites a committed checkpoint's manifest in the format before block
// hashes (CheckpointFile.block_bytes / block_xxhash64 cleared), so
// checkpoint_bench can measure, in the same run, the restore a restarted
// service gave such a checkpoint: the whole files read and hashed on first
// access, then read again to be served.
#pragma once

#include <string>

namespace zeroshard::bench {

// `step_dir`: a committed checkpoint's directory (it holds manifest.json).
// Exits the process with the reason on any error (a bench helper).
void StripBlockHashes(const std::string& step_dir);

}  // namespace zeroshard::bench
