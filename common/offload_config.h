// Offload settings shared by `zeroshard launch`, zeroshard-worker and the
// engine (the flags' words are common/job_choices.h's): the check that an
// NVMe offload dir exists and has room, made before training starts.
// Thread-safe: pure functions (CheckOffloadDir reads the filesystem).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace zeroshard {

// `dir` must be an existing, writable directory whose filesystem has at
// least `bytes_needed` bytes free (statvfs f_bavail). Errors, each one line
// naming --offload-dir: INVALID_ARGUMENT (empty), NOT_FOUND (missing or not
// a directory), PERMISSION_DENIED (not writable), RESOURCE_EXHAUSTED (too
// little space, with both numbers).
absl::Status CheckOffloadDir(const std::string& dir, int64_t bytes_needed);

// Bytes of NVMe offload files `ranks` ranks on one machine need for `psi`
// parameters at `stage`: 12 bytes of optimizer state per parameter (all of
// them on every rank at stage 0), plus with `params` the stage-3 shards of
// `compute_bytes` each, plus 4096 bytes of alignment per file and rank.
int64_t OffloadBytesNeeded(int64_t psi, int stage, int ranks, bool optimizer, bool params,
                           int compute_bytes, int units);

}  // namespace zeroshard
