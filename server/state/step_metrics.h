// Step-report figures mirrored into metrics beside TrainingState's own:
//   zeroshard_tokens_total         counter  global tokens trained, counted once
//                                           per step (on the report that first
//                                           advances the job's step)
//   zeroshard_grad_norm            gauge    global gradient norm before clipping
//   zeroshard_grad_norm_clipped    gauge    after clipping (norm x clip_coef)
//   zeroshard_grad_clips_total     counter  steps where clipping scaled the
//                                           gradients (clip_coef < 1)
//   zeroshard_worker_rss_bytes{rank} gauge  each worker's resident set size
// Gauges follow the newest report of the job's step; a report from a worker
// that predates a field leaves its metric alone (absent until first sent).
//
// Thread safety: not thread-safe; TrainingState's owner serialises access.
#pragma once

#include "absl/status/status.h"
#include "common/infra/metrics.h"
#include "zeroshard/v1/coordinator.pb.h"

namespace zeroshard::server {

class StepMetrics {
 public:
  explicit StepMetrics(MetricsRegistry* metrics);

  // INVALID_ARGUMENT naming the field: tokens or rss_bytes negative or
  // absurd, grad_norm negative or -Inf, clip_coef outside (0, 1].
  static absl::Status Validate(const v1::StepReport& report);

  // `current`: the report is of the job's newest step; `advanced`: it made
  // that step the job's (the ranks agreed on it).
  void Record(const v1::StepReport& report, bool current, bool advanced);
  // Forgets per-rank series (a generation ended).
  void ClearRanks();

 private:
  MetricFamily* tokens_total_;
  MetricFamily* grad_norm_;
  MetricFamily* grad_norm_clipped_;
  MetricFamily* grad_clips_total_;
  MetricFamily* worker_rss_;
};

}  // namespace zeroshard::server
