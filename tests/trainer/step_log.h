// Reads a training run's step log (--log, one StepRecord per JSON line) for
// the trainer tests.
#pragma once

#include <fstream>
#include <string>
#include <vector>

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

}  // namespace zeroshard::testing
