// Reads a training run's step log (--log, one StepRecord per JSON line) for
// the trainer tests.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/support/file_watch.h"
#include "worker/trainer/step_record.h"

namespace zeroshard::testing {

// Every step record in the log at `path`, in file order; lines that do not
// parse as a record (or a missing file) are skipped.
inline std::vector<StepRecord> ReadStepRecords(const std::string& path) {
  std::vector<StepRecord> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto record = StepRecord::FromJsonLine(line);
    if (record.ok()) out.push_back(*std::move(record));
  }
  return out;
}

// The records of `records` whose events (StepRecord::events) include `event`.
inline std::vector<StepRecord> WithEvent(const std::vector<StepRecord>& records,
                                         const std::string& event) {
  std::vector<StepRecord> out;
  for (const StepRecord& r : records) {
    for (const std::string& e : r.events) {
      if (e == event) {
        out.push_back(r);
        break;
      }
    }
  }
  return out;
}

// Waits (on the log's directory's file events, file_watch.h) until the step
// log's last record is at `step` or later and, when `world_size` > 0, at
// that world size; false after `timeout`.
inline bool WaitForStep(const std::string& log, int64_t step, int world_size = 0,
                        absl::Duration timeout = absl::Seconds(90)) {
  return WaitForFiles(
      DirOf(log),
      [&] {
        const std::vector<StepRecord> records = ReadStepRecords(log);
        return !records.empty() && records.back().step >= step &&
               (world_size <= 0 || records.back().world_size == world_size);
      },
      timeout);
}

}  // namespace zeroshard::testing
