#include "cli/launch_monitor.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zeroshard::cli {

std::vector<StepRecord> StepLogFollower::Poll() {
  std::vector<StepRecord> out;
  if (!in_.is_open()) {
    in_.open(path_);
    if (!in_.is_open()) return out;
  }
  std::string chunk;
  char buf[65536];
  in_.clear();
  while (in_.read(buf, sizeof(buf)) || in_.gcount() > 0) chunk.append(buf, in_.gcount());
  in_.clear();
  partial_ += chunk;
  size_t start = 0;
  for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1) {
    auto record = StepRecord::FromJsonLine(partial_.substr(start, nl - start));
    if (record.ok()) out.push_back(*std::move(record));
  }
  partial_.erase(0, start);
  return out;
}

void ProgressState::Add(const StepRecord& r, absl::Time at) {
  if (first_loss < 0) {
    first_loss = r.loss;
    first_step = r.step;
    first_seen = at;
  }
  if (r.val_loss >= 0) {
    last_val_loss = r.val_loss;
    last_val_step = r.step;
  }
  tokens_per_second.push_back(r.tokens_per_second);
  for (const RankStepStats& s : r.ranks) {
    peak_per_rank_max.params = std::max(peak_per_rank_max.params, s.peak_memory.params);
    peak_per_rank_max.grads = std::max(peak_per_rank_max.grads, s.peak_memory.grads);
    peak_per_rank_max.optimizer = std::max(peak_per_rank_max.optimizer, s.peak_memory.optimizer);
    peak_per_rank_max.buffers = std::max(peak_per_rank_max.buffers, s.peak_memory.buffers);
  }
  last = r;
}

namespace {

// "1h02m03s", "4m05s", "12s".
std::string Clock(absl::Duration d) {
  const int64_t s = std::max<int64_t>(0, absl::ToInt64Seconds(d));
  if (s >= 3600) return absl::StrFormat("%dh%02dm%02ds", s / 3600, s / 60 % 60, s % 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

}  // namespace

std::string ProgressState::Line(absl::Time now) const {
  if (!last) {
    return absl::StrCat("waiting for workers to form a generation... (", Clock(now - started), ")");
  }
  std::string val = last_val_loss >= 0 ? absl::StrFormat(" | val %.3f", last_val_loss) : "";
  const int64_t done = last->step - first_step;
  std::string eta = "ETA -";
  if (done > 0 && last->step < total_steps) {
    eta = "ETA " + Clock((now - first_seen) * static_cast<double>(total_steps - last->step) /
                         static_cast<double>(done));
  } else if (last->step >= total_steps) {
    eta = "done";
  }
  return absl::StrFormat(
      "step %d/%d | loss %.4f%s | %.0f tok/s | %.2f s/step | gen %d, %d ranks | peak %.2f "
      "MiB/rank | %s elapsed, %s",
      last->step, total_steps, last->loss, val, last->tokens_per_second, last->step_seconds,
      last->generation, last->world_size, peak_per_rank_max.total() / 1048576.0,
      Clock(now - started), eta);
}

}  // namespace zeroshard::cli
