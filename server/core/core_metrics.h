// The coordinator core's metrics, one class over the registry (as
// CheckpointMetrics is for the store), so the core says what happened and
// this says how Prometheus sees it:
//   zeroshard_generation                      gauge    current generation (0: none yet)
//   zeroshard_workers                         gauge    world size of the running generation
//   zeroshard_waiting_workers                 gauge    live members waiting for the next one
//   zeroshard_generation_changes_total{reason} counter  generations formed, by why the
//       previous ended (kGenerationReasons; every reason exists at 0)
//   zeroshard_member_removals_total{reason}   counter  members removed (kRemovalReasons)
//   zeroshard_heartbeats_total, zeroshard_joins_total  counters
//   zeroshard_kv_keys, zeroshard_kv_bytes     gauges   the rendezvous store's size
//   zeroshard_kv_waits_parked                 gauge    KvWaits parked for missing keys
//   zeroshard_job_state{state}                gauge    1 for the job's state, 0 for the others
//   zeroshard_job_failures_total              counter  failures against max_failures
//   zeroshard_last_lost_rank{worker_id, operation, reason}  gauge (value: the rank)
//   zeroshard_rank_info{rank, worker_id, host, pod}         gauge 1 per rank
//   zeroshard_build_info{version, insecure, allocator}      gauge 1
// Thread-safe (the metric families lock); the core calls it under its lock.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/infra/metrics.h"
#include "server/membership/membership.h"

namespace zeroshard::server {

// What the gauges show at one moment.
struct CoreGauges {
  uint64_t generation = 0;
  int world_size = 0;
  size_t waiting = 0;
  size_t kv_keys = 0;
  size_t kv_bytes = 0;
  size_t kv_waits_parked = 0;
  JobState job_state = JobState::kWaiting;
  int64_t failures = 0;
};

// One rank of the running generation, as zeroshard_rank_info labels it.
struct RankLabels {
  int rank = 0;
  std::string worker_id, hostname, pod;
};

class CoreMetrics {
 public:
  // `metrics` must outlive this. `insecure`: build_info's label.
  CoreMetrics(MetricsRegistry* metrics, bool insecure);

  void Joined() { joins_->Add({}); }
  void Heartbeat() { heartbeats_->Add({}); }
  void MemberRemoved(ChangeReason why) { removals_->Add({ChangeReasonName(why)}); }
  void GenerationFormed(ChangeReason why) { changes_->Add({ChangeReasonName(why)}); }
  void Set(const CoreGauges& g);
  // The last rank lost: one series, replacing the previous one.
  void SetLastLost(const std::string& worker_id, const std::string& operation,
                   const std::string& reason, int rank);
  // The running generation's ranks (none: the series are cleared).
  void SetRanks(const std::vector<RankLabels>& ranks);

 private:
  MetricFamily* generation_;
  MetricFamily* workers_;
  MetricFamily* waiting_;
  MetricFamily* changes_;
  MetricFamily* heartbeats_;
  MetricFamily* joins_;
  MetricFamily* removals_;
  MetricFamily* kv_keys_;
  MetricFamily* kv_bytes_;
  MetricFamily* kv_waits_;
  MetricFamily* job_state_;
  MetricFamily* failures_;
  MetricFamily* lost_rank_;
  MetricFamily* rank_info_;
};

}  // namespace zeroshard::server
