// The table `zeroshard launch` prints at the end: losses, throughput, and
// every rank's model-state memory by kind next to the ZeRO formula for the
// stage (common/zero_memory.h), and each rank's peak activation bytes (the
// model's, outside the formula). Pure formatting; thread-safe.
#pragma once

#include <string>

#include "cli/launch_monitor.h"

namespace zeroshard::cli {

struct SummaryInputs {
  const ProgressState* progress = nullptr;
  int stage = 0;
  int64_t num_params = 0;  // Ψ, without padding.
  int compute_bytes = 4;   // Bytes per compute-copy element.
  int grad_bytes = 4;      // Bytes per gradient element the engine holds.
  double wall_seconds = 0;
  int vocab = 256;  // The model's vocabulary: a uniform guess scores ln(vocab).
};

std::string FormatSummary(const SummaryInputs& in);

}  // namespace zeroshard::cli
