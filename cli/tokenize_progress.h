// A progress line for long CLI jobs: on a terminal, one line redrawn in
// place (percent, a bar, MB/s and tokens/s), at most five times a second;
// elsewhere nothing, so logs stay clean.
//
// Thread safety: one thread.
#pragma once

#include <cstdint>

#include "absl/time/time.h"

namespace zeroshard::cli {

class ProgressLine {
 public:
  ProgressLine();  // Draws only when stderr is a terminal.
  void Update(int64_t done_bytes, int64_t total_bytes, int64_t tokens);
  void Finish();  // Ends the line, if one was drawn.

 private:
  bool tty_;
  bool drawn_ = false;
  absl::Time start_;
  absl::Time last_;
};

}  // namespace zeroshard::cli
