#include "server/state/step_metrics.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"

namespace zeroshard::server {
namespace {

constexpr int64_t kMaxTokensPerStep = int64_t{1} << 50;
constexpr int64_t kMaxRssBytes = int64_t{1} << 56;  // 64 PiB.

}  // namespace

StepMetrics::StepMetrics(MetricsRegistry* metrics)
    : tokens_total_(metrics->Counter("zeroshard_tokens_total",
                                     "Tokens the job trained (global tokens of each step, counted "
                                     "once per step).")),
      grad_norm_(metrics->Gauge("zeroshard_grad_norm",
                                "Global gradient L2 norm of the latest step, before clipping.")),
      grad_norm_clipped_(metrics->Gauge(
          "zeroshard_grad_norm_clipped",
          "Global gradient L2 norm of the latest step after clipping (norm x clip coefficient).")),
      grad_clips_total_(metrics->Counter("zeroshard_grad_clips_total",
                                         "Steps where gradient clipping scaled the gradients.")),
      worker_rss_(metrics->Gauge("zeroshard_worker_rss_bytes",
                                 "Resident set size of each rank's worker process, bytes.",
                                 {"rank"})) {
  tokens_total_->Add({}, 0);
  grad_clips_total_->Add({}, 0);
}

absl::Status StepMetrics::Validate(const v1::StepReport& r) {
  if (r.tokens() < 0 || r.tokens() > kMaxTokensPerStep) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokens = ", r.tokens(), " is outside [0, ", kMaxTokensPerStep, "]"));
  }
  if (r.rss_bytes() < 0 || r.rss_bytes() > kMaxRssBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("rss_bytes = ", r.rss_bytes(), " is outside [0, ", kMaxRssBytes, "]"));
  }
  // NaN and +Inf are what an overflowed (skipped) step measures.
  if (r.has_grad_norm() && (r.grad_norm() < 0)) {
    return absl::InvalidArgumentError(absl::StrCat("grad_norm = ", r.grad_norm(), " is negative"));
  }
  if (r.has_clip_coef() && !(r.clip_coef() > 0 && r.clip_coef() <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("clip_coef = ", r.clip_coef(), " is not in (0, 1]"));
  }
  return absl::OkStatus();
}

void StepMetrics::Record(const v1::StepReport& r, bool current, bool advanced) {
  if (advanced) {
    tokens_total_->Add({}, static_cast<double>(r.tokens()));
    if (r.has_clip_coef() && r.clip_coef() < 1) grad_clips_total_->Add({});
  }
  if (current && r.has_grad_norm()) {
    grad_norm_->Set({}, r.grad_norm());
    const double coef = r.has_clip_coef() ? r.clip_coef() : 1.0;
    grad_norm_clipped_->Set({}, r.grad_norm() * coef);
  }
  if (r.rss_bytes() > 0) {
    worker_rss_->Set({absl::StrCat(r.rank())}, static_cast<double>(r.rss_bytes()));
  }
}

void StepMetrics::ClearRanks() { worker_rss_->Clear(); }

}  // namespace zeroshard::server
