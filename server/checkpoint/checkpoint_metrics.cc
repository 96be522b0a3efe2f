#include "server/checkpoint/checkpoint_metrics.h"

#include <algorithm>

namespace zeroshard::server {

CheckpointMetrics::CheckpointMetrics(MetricsRegistry* metrics)
    : saves_(metrics->Counter("zeroshard_checkpoint_saves_total", "Checkpoints committed.")),
      failures_(metrics->Counter(
          "zeroshard_checkpoint_failures_total",
          "Checkpoint saves that failed or were abandoned before committing, by reason.",
          {"reason"})),
      bytes_(metrics->Counter("zeroshard_checkpoint_bytes_total",
                              "Data bytes of committed checkpoints.")),
      seconds_(metrics->Histogram("zeroshard_checkpoint_save_seconds",
                                  "Seconds from a checkpoint save's start to its commit.",
                                  {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600})),
      last_step_(metrics->Gauge("zeroshard_checkpoint_last_step",
                                "Step of the newest committed checkpoint.")) {
  saves_->Add({}, 0);
  bytes_->Add({}, 0);
  for (const char* reason : kCheckpointFailureReasons) failures_->Add({reason}, 0);
}

void CheckpointMetrics::Attach(CheckpointStore* store) {
  const v1::ListCheckpointsResponse list = store->List("");
  if (list.checkpoints_size() > 0) {
    last_step_->Set({}, static_cast<double>(list.checkpoints(list.checkpoints_size() - 1).step()));
  }
  store->SetObserver(this);
}

void CheckpointMetrics::Committed(int64_t step, int64_t bytes, double seconds) {
  saves_->Add({});
  bytes_->Add({}, static_cast<double>(bytes));
  seconds_->Observe({}, std::max(0.0, seconds));
  // A re-commit of an older step (a rollback) is still the newest commit.
  last_step_->Set({}, static_cast<double>(step));
}

void CheckpointMetrics::Failed(const char* reason) { failures_->Add({reason}); }

}  // namespace zeroshard::server
