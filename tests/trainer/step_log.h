// Reads a training run's step log (--log, one StepRecord per JSON line) for
// the trainer tests.
#pragma once

#include <fstream>
#include <optional>
#include <string>
#include <utility>
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

// A step log read as it grows: each Poll parses only the complete lines
// appended since the last, so a wait over a long run does not parse the
// whole log on every write (a 2000-step log re-read at each step took most
// of a core from the workers under test).
class StepLogTail {
 public:
  explicit StepLogTail(std::string path) : path_(std::move(path)) {}

  // The records of the lines completed since the last call, in file order;
  // lines that do not parse are skipped, a missing file reads as empty.
  std::vector<StepRecord> Poll() {
    std::ifstream in(path_, std::ios::binary);
    std::vector<StepRecord> out;
    if (!in || !in.seekg(offset_)) return out;
    std::string line;
    while (std::getline(in, line)) {
      if (in.eof()) break;  // No newline yet: a line still being written.
      offset_ += static_cast<std::streamoff>(line.size()) + 1;
      auto record = StepRecord::FromJsonLine(line);
      if (record.ok()) out.push_back(*std::move(record));
    }
    return out;
  }

 private:
  std::string path_;
  std::streamoff offset_ = 0;
};

// Waits (on the log's directory's file events, file_watch.h) until the step
// log's last record is at `step` or later and, when `world_size` > 0, at
// that world size; false after `timeout`.
inline bool WaitForStep(const std::string& log, int64_t step, int world_size = 0,
                        absl::Duration timeout = absl::Seconds(90)) {
  StepLogTail tail(log);
  std::optional<StepRecord> last;
  return WaitForFiles(
      DirOf(log),
      [&] {
        std::vector<StepRecord> added = tail.Poll();
        if (!added.empty()) last = std::move(added.back());
        return last.has_value() && last->step >= step &&
               (world_size <= 0 || last->world_size == world_size);
      },
      timeout);
}

// Waits (on the log's file events) for a record at `world_size` ranks past
// step `after`, until `deadline`; the time from `since` to when it was
// seen, InfiniteDuration if it was not.
inline absl::Duration TimeToStepAt(const std::string& log, int world_size, int64_t after,
                                   absl::Time since, absl::Time deadline) {
  StepLogTail tail(log);
  const bool seen = WaitForFiles(
      DirOf(log),
      [&] {
        for (const StepRecord& r : tail.Poll()) {
          if (r.world_size == world_size && r.step > after) return true;
        }
        return false;
      },
      deadline - absl::Now());
  return seen ? absl::Now() - since : absl::InfiniteDuration();
}

}  // namespace zeroshard::testing
