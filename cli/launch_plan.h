// `zeroshard launch`'s memory decisions, from the one memory model
// (common/run_plan.h): --stage auto picks the lowest stage that fits this
// machine's memory, and a stage that does not fit is refused with the
// breakdown. Memory: the device layer's free memory (MemAvailable on the
// CPU, cudaMemGetInfo's free on a GPU, plus MemAvailable for the host), or,
// for tests, ZEROSHARD_MEMORY_AVAILABLE=<bytes> in place of every figure.
// Not thread-safe (called once, before anything starts).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "cli/launch_job.h"
#include "common/model/model_config.h"

namespace zeroshard::cli {

// The testing override of the memory figures (bytes).
inline constexpr char kMemoryAvailableEnv[] = "ZEROSHARD_MEMORY_AVAILABLE";

// With `auto_stage`, sets o.job.stage to the choice and prints it and the
// reason on stdout; otherwise checks o.job.stage. RESOURCE_EXHAUSTED with
// the breakdown (per worker by kind, times the workers, against what is
// available) when it does not fit (with auto: when no stage fits);
// INVALID_ARGUMENT for a bad ZEROSHARD_MEMORY_AVAILABLE.
absl::Status PlanLaunchMemory(LaunchOptions& o, const ModelConfig& model, bool auto_stage);

}  // namespace zeroshard::cli
