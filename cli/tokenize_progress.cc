#include "cli/tokenize_progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "absl/time/clock.h"

namespace zeroshard::cli {

ProgressLine::ProgressLine()
    : tty_(isatty(STDERR_FILENO) == 1), start_(absl::Now()), last_(absl::InfinitePast()) {}

void ProgressLine::Update(int64_t done_bytes, int64_t total_bytes, int64_t tokens) {
  const absl::Time now = absl::Now();
  if (!tty_ || now - last_ < absl::Milliseconds(200)) return;
  last_ = now;
  const double frac = total_bytes > 0 ? std::min(1.0, double(done_bytes) / total_bytes) : 0.0;
  const double s = std::max(1e-9, absl::ToDoubleSeconds(now - start_));
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(frac * kWidth);
  std::fprintf(stderr, "\r%3d%% [%s%s] %.1f MB/s %.2fM tokens/s ", static_cast<int>(frac * 100),
               std::string(filled, '#').c_str(), std::string(kWidth - filled, ' ').c_str(),
               done_bytes / s / 1e6, tokens / s / 1e6);
  drawn_ = true;
}

void ProgressLine::Finish() {
  if (drawn_) std::fputc('\n', stderr);
  drawn_ = false;
}

}  // namespace zeroshard::cli
