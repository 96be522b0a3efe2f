// The checkpoint store's outcomes as metrics (a CheckpointObserver):
//   zeroshard_checkpoint_saves_total            counter  checkpoints committed
//   zeroshard_checkpoint_failures_total{reason} counter  saves that failed or
//       were dropped, by kCheckpointFailureReasons; every reason exists at 0
//   zeroshard_checkpoint_bytes_total            counter  data bytes committed
//   zeroshard_checkpoint_save_seconds           histogram  first Begin to commit
//   zeroshard_checkpoint_last_step              gauge    step of the newest
//       committed checkpoint; absent until there is one
//
// Usage: construct over the coordinator's registry, Attach to the store
// (which sets last_step from what the store already holds); detach with
// store->SetObserver(nullptr) or outlive the store's callers.
//
// Thread-safe (the metric families lock).
#pragma once

#include <cstdint>

#include "common/infra/metrics.h"
#include "server/checkpoint/checkpoint_store.h"

namespace zeroshard::server {

class CheckpointMetrics final : public CheckpointObserver {
 public:
  // `metrics` must outlive this.
  explicit CheckpointMetrics(MetricsRegistry* metrics);

  // Sets last_step from `store`'s newest committed checkpoint (if any) and
  // observes it from now on.
  void Attach(CheckpointStore* store);

  void Committed(int64_t step, int64_t bytes, double seconds) override;
  void Failed(const char* reason) override;

 private:
  MetricFamily* saves_;
  MetricFamily* failures_;
  MetricFamily* bytes_;
  MetricFamily* seconds_;
  MetricFamily* last_step_;
};

}  // namespace zeroshard::server
