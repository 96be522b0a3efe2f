#include "server/core/core_metrics.h"

#include "absl/strings/str_cat.h"
#include "common/infra/allocator.h"
#include "common/version.h"

namespace zeroshard::server {

CoreMetrics::CoreMetrics(MetricsRegistry* metrics, bool insecure)
    : generation_(metrics->Gauge("zeroshard_generation",
                                 "Current generation number (0 = none formed yet).")),
      workers_(metrics->Gauge("zeroshard_workers", "World size of the running generation.")),
      waiting_(metrics->Gauge("zeroshard_waiting_workers",
                              "Live members waiting for the next generation.")),
      changes_(metrics->Counter("zeroshard_generation_changes_total",
                                "Generations formed, by the reason the previous one ended.",
                                {"reason"})),
      heartbeats_(metrics->Counter("zeroshard_heartbeats_total", "Heartbeats accepted.")),
      joins_(metrics->Counter("zeroshard_joins_total", "Members admitted by Join.")),
      removals_(metrics->Counter("zeroshard_member_removals_total", "Members removed, by reason.",
                                 {"reason"})),
      kv_keys_(metrics->Gauge("zeroshard_kv_keys", "Keys in the rendezvous store.")),
      kv_bytes_(metrics->Gauge("zeroshard_kv_bytes",
                               "Bytes of keys and values in the rendezvous store.")),
      kv_waits_(metrics->Gauge("zeroshard_kv_waits_parked",
                               "KvWait calls parked until their keys are set.")),
      job_state_(metrics->Gauge("zeroshard_job_state",
                                "1 for the job's lifecycle state (waiting, running, "
                                "completed, failed), 0 for the others.",
                                {"state"})),
      failures_(metrics->Counter(
          "zeroshard_job_failures_total",
          "Failures counted against the job's max_failures (lost members, failure reports).")),
      lost_rank_(metrics->Gauge(
          "zeroshard_last_lost_rank",
          "The last rank lost to a failure (value: its rank), with its worker, the collective "
          "the survivors were in, and why it was removed.",
          {"worker_id", "operation", "reason"})),
      rank_info_(metrics->Gauge(
          "zeroshard_rank_info",
          "1 for each rank of the running generation, with its worker id, the worker's "
          "hostname and its Kubernetes pod (\"\" outside Kubernetes).",
          {"rank", "worker_id", "host", "pod"})) {
  heartbeats_->Add({}, 0);  // Counters exist at 0, so increase() sees the first event.
  joins_->Add({}, 0);
  for (ChangeReason why : kGenerationReasons) changes_->Add({ChangeReasonName(why)}, 0);
  for (ChangeReason why : kRemovalReasons) removals_->Add({ChangeReasonName(why)}, 0);
  metrics
      ->Gauge("zeroshard_build_info",
              "The coordinator's build (value 1); insecure=\"true\" when it serves a "
              "non-loopback address without TLS and tokens (--insecure); allocator: "
              "its malloc, tcmalloc or glibc (common/infra/allocator.h).",
              {"version", "insecure", "allocator"})
      ->Set({kZeroshardVersion, insecure ? "true" : "false", MallocName()}, 1);
}

void CoreMetrics::Set(const CoreGauges& g) {
  generation_->Set({}, static_cast<double>(g.generation));
  workers_->Set({}, g.world_size);
  waiting_->Set({}, static_cast<double>(g.waiting));
  kv_keys_->Set({}, static_cast<double>(g.kv_keys));
  kv_bytes_->Set({}, static_cast<double>(g.kv_bytes));
  kv_waits_->Set({}, static_cast<double>(g.kv_waits_parked));
  for (JobState s :
       {JobState::kWaiting, JobState::kRunning, JobState::kCompleted, JobState::kFailed}) {
    job_state_->Set({JobStateName(s)}, s == g.job_state ? 1 : 0);
  }
  failures_->Set({}, static_cast<double>(g.failures));
}

void CoreMetrics::SetLastLost(const std::string& worker_id, const std::string& operation,
                              const std::string& reason, int rank) {
  lost_rank_->Clear();
  lost_rank_->Set({worker_id, operation, reason}, rank);
}

void CoreMetrics::SetRanks(const std::vector<RankLabels>& ranks) {
  rank_info_->Clear();
  for (const RankLabels& r : ranks) {
    rank_info_->Set({absl::StrCat(r.rank), r.worker_id, r.hostname, r.pod}, 1);
  }
}

}  // namespace zeroshard::server
