// Watches a launched job: follows rank 0's step log (JSONL, one StepRecord a
// line), prints a live progress line, and notices workers that exit.
// Not thread-safe: one monitoring thread.
#pragma once

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "worker/trainer/step_record.h"

namespace zeroshard::cli {

class StepLogFollower {
 public:
  explicit StepLogFollower(std::string path) : path_(std::move(path)) {}
  // Complete lines appended since the last call, parsed; malformed lines are
  // skipped (a partial last line waits for the next call).
  std::vector<StepRecord> Poll();

 private:
  std::string path_;
  std::ifstream in_;
  std::string partial_;
};

// What the progress line shows; kept so the summary can use it too.
struct ProgressState {
  int64_t total_steps = 0;
  std::optional<StepRecord> last;
  double last_val_loss = -1;
  int64_t last_val_step = -1;
  double first_loss = -1;
  int64_t first_step = 0;                          // Step of the first record (> 1 after a resume).
  std::vector<double> tokens_per_second;           // One per step seen.
  MemoryByKind peak_per_rank_max;                  // Max over ranks of peak bytes.
  absl::Time started = absl::Now();                // When the launch began (elapsed time).
  absl::Time first_seen = absl::InfiniteFuture();  // When the first record arrived.
  // `at`: when the record was read (tests pass a fixed time).
  void Add(const StepRecord& record, absl::Time at = absl::Now());
  // One line, no newline: step, loss, throughput, generation, memory,
  // elapsed time and the ETA (steps left at the pace since the first record).
  std::string Line(absl::Time now = absl::Now()) const;
};

}  // namespace zeroshard::cli
