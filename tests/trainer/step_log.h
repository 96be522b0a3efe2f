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

// Waits (on the log's file events) for a record at `world_size` ranks past
// step `after`, until `deadline`; the time from `since` to when it was
// seen, InfiniteDuration if it was not.
inline absl::Duration TimeToStepAt(const std::string& log, int world_size, int64_t after,
                                   absl::Time since, absl::Time deadline) {
  const bool seen = WaitForFiles(
      DirOf(log),
      [&] {
        for (const StepRecord& r : ReadStepRecords(log)) {
          if (r.world_size == world_size && r.step > after) return true;
        }
        return false;
      },
      deadline - absl::Now());
  return seen ? absl::Now() - since : absl::InfiniteDuration();
}

}  // namespace zeroshard::testing
