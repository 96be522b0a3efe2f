// Training state from step reports: the job's step, loss, throughput and
// step time, and per-rank memory bytes by kind and communication totals by
// op. Mirrors every figure into the metrics registry (names in the .cc;
// Prometheus conventions: base units, `_total` counters, rank/kind/op
// labels).
//
// [Note: agreed step] The job's step is the highest step that every rank
// of the running generation has reported (the lowest of their newest
// reports), never above what the ranks actually trained: one rank, or a
// caller holding one rank's credential, cannot move the job (or complete
// it) on its own. Loss, tokens/s and step time follow the report that
// brought the agreement, which carries that step's global figures. Per-rank figures belong
// to the running generation and are cleared when it ends (ranks renumber).
// zeroshard_tokens_per_second drops to 0 when a generation ends or the job
// stops (ClearRanks, ThroughputStopped), so it never holds a stale figure
// through a stall; StepMetrics (step_metrics.h) adds the token, gradient
// and worker RSS metrics.
//
// Thread safety: not thread-safe; CoordinatorCore serialises access. The
// metric families it writes are themselves thread-safe.
#pragma once

#include <cstdint>
#include <map>

#include "absl/status/status.h"
#include "common/infra/metrics.h"
#include "server/state/step_metrics.h"
#include "zeroshard/v1/coordinator.pb.h"

namespace zeroshard::server {

class TrainingState {
 public:
  // `last_step`/`last_loss`: restored from durable state (0 / NaN if none).
  TrainingState(MetricsRegistry* metrics, int64_t last_step, double last_loss);

  // Checks the report's own fields (not membership): step >= 0, finite
  // non-negative sizes and times, known comm ops without duplicates.
  // INVALID_ARGUMENT naming the field.
  static absl::Status Validate(const v1::StepReport& report);

  // The job's step once `report` is recorded, in a generation of
  // `world_size` ranks ([Note: agreed step]); never below step().
  int64_t AgreedStepWith(const v1::StepReport& report, int world_size) const;
  // Records a validated report of a rank of a generation of `world_size`.
  // Returns true if the job's step advanced.
  bool Record(const v1::StepReport& report, int world_size);
  // Forgets per-rank figures (a generation ended) and sets the throughput
  // gauge to 0.
  void ClearRanks();
  // No steps are running (the job ended): the throughput gauge reads 0.
  void ThroughputStopped();

  // Fills step, loss, tokens/s, step time, val loss and per-rank status.
  void FillStatus(v1::JobStatus* status) const;
  int64_t step() const { return step_; }
  double loss() const { return loss_; }

 private:
  int64_t step_;
  double loss_;
  double val_loss_;
  double tokens_per_second_ = 0;
  double step_seconds_ = 0;
  std::map<int, v1::RankStatus> ranks_;

  MetricFamily* step_metric_;
  MetricFamily* loss_metric_;
  MetricFamily* val_loss_metric_;
  MetricFamily* tokens_metric_;
  MetricFamily* step_seconds_metric_;
  MetricFamily* memory_metric_;
  MetricFamily* peak_memory_metric_;
  MetricFamily* device_memory_metric_;
  MetricFamily* comm_bytes_metric_;
  MetricFamily* comm_seconds_metric_;
  MetricFamily* comm_calls_metric_;
  StepMetrics step_metrics_;
};

}  // namespace zeroshard::server
