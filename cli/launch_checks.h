// Checks `zeroshard launch` makes before it starts anything, so a bad request
// fails in one clear line with nothing left running.
#pragma once

#include "absl/status/status.h"
#include "cli/launch_job.h"

namespace zeroshard::cli {

// Fills defaults (dtypes, threads, data paths made absolute, resume) and
// validates: model preset, stage, data present and non-empty, and the
// memory the job would need on this machine. INVALID_ARGUMENT /
// NOT_FOUND / RESOURCE_EXHAUSTED with the numbers.
absl::Status PrepareLaunch(LaunchOptions& options);

}  // namespace zeroshard::cli
