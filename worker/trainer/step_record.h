// One training step as the job log (--log FILE.jsonl) and the progress line
// see it: global figures plus every rank's memory and communication.
// Ranks exchange their figures with one small all-gather of doubles per step
// (RankStepStats::kDoubles each, plus the trainer's own flags), so rank 0 can
// write the whole record.
// Thread-compatible value types.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/zero_memory.h"

namespace zeroshard {

struct RankStepStats {
  MemoryByKind memory;       // Bytes held at the end of the step.
  MemoryByKind peak_memory;  // Peak bytes since the generation started.
  // Bytes and seconds this step, by op: all_gather, reduce_scatter, all_reduce.
  std::array<int64_t, 3> comm_bytes{};
  std::array<double, 3> comm_seconds{};

  static constexpr int kMemoryDoubles = 7;  // One MemoryByKind.
  static constexpr int kDoubles = 2 * kMemoryDoubles + 6;
  std::array<double, kDoubles> Pack() const;
  static RankStepStats Unpack(const double* values);
};

struct StepRecord {
  int64_t step = 0;      // Optimizer steps done (1 after the first).
  double loss = 0;       // Mean token loss over the global batch.
  double val_loss = -1;  // < 0 when not evaluated at this step.
  double lr = 0;
  double grad_norm = 0;  // Global gradient norm before clipping.
  int world_size = 0;
  uint64_t generation = 0;
  int stage = 0;
  double step_seconds = 0;
  double redundancy_seconds = 0;  // Rank 0's peer-copy refresh after the step (0 = none).
  double tokens_per_second = 0;
  // Targets the loss counted over the global batch: batch x context for
  // text, fewer for fine-tuning pairs (their prompts and padding are not).
  int64_t counted_tokens = 0;
  std::string sample;  // Text sampled at this step (JobConfig::sample_every); "" none.
  std::vector<RankStepStats> ranks;  // Indexed by rank.
  // What happened besides training, in order (empty on most steps). On a
  // generation's first record, where its state came from (GenerationStart):
  // "initialized" (the seeded init), "loaded_model" (the model directory's
  // weights), "resharded_live" (the previous generation's state, no
  // checkpoint read) or "restored_checkpoint". On the record where the ranks
  // stopped early: "handed_off" (a member waits to join), "left" (the ranks
  // in `leaving` left) or "stopped" (an operator's `zeroshard stop`).
  std::vector<std::string> events;
  int64_t start_step = -1;   // With a start event: the step its state was from.
  std::string live_refused;  // Why live resharding was refused before a restore ("" none).
  std::vector<int> leaving;  // With "left": the ranks that left, ascending.

  std::string ToJsonLine() const;  // One line, no trailing newline.
  // Parses a line written by ToJsonLine; INVALID_ARGUMENT if malformed.
  static absl::StatusOr<StepRecord> FromJsonLine(const std::string& line);
};

// Names of the three op slots, as metric labels.
inline constexpr const char* kCommOpSlots[3] = {"all_gather", "reduce_scatter", "all_reduce"};

}  // namespace zeroshard
