// Helpers for driving CoordinatorCore with a FakeClock: no sockets, no
// sleeps. Each helper fails the calling test on an unexpected error.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/infra/metrics.h"
#include "common/model/job_config.h"
#include "gtest/gtest.h"
#include "server/core/coordinator_core.h"

namespace zeroshard::server::testing {

struct CoreHarness {
  explicit CoreHarness(const CoreOptions& options, const std::string& state_dir = "") {
    auto durable = DurableState::Open(state_dir);
    EXPECT_TRUE(durable.ok()) << durable.status();
    auto created = CoordinatorCore::Create(options, std::move(*durable), &clock, &metrics);
    EXPECT_TRUE(created.ok()) << created.status();
    core = std::move(*created);
  }

  uint64_t Join(const std::string& worker_id) {
    v1::JoinRequest r;
    r.set_job_id(core->job_id());
    r.set_worker_id(worker_id);
    r.set_host("127.0.0.1");
    auto out = core->Join(r);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? out->member_id() : 0;
  }

  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(uint64_t member_id) {
    v1::HeartbeatRequest r;
    r.set_job_id(core->job_id());
    r.set_member_id(member_id);
    return core->Heartbeat(r);
  }

  v1::GenerationInfo Info(uint64_t member_id) {
    v1::GetGenerationRequest r;
    r.set_job_id(core->job_id());
    r.set_member_id(member_id);
    auto out = core->GetGeneration(r);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : v1::GenerationInfo();
  }

  // A step report of `member` at `rank` in the current generation.
  absl::Status ReportStep(uint64_t member, int rank, int64_t step) {
    v1::StepReport r;
    r.set_job_id(core->job_id());
    r.set_member_id(member);
    r.set_generation(core->generation());
    r.set_rank(rank);
    r.set_step(step);
    return core->ReportStep(r);
  }

  // A failure report of `member` in the current generation, naming no rank.
  absl::Status ReportFailure(uint64_t member,
                             const std::string& reason = "all_gather: connection reset") {
    v1::ReportFailureRequest r;
    r.set_job_id(core->job_id());
    r.set_member_id(member);
    r.set_generation(core->generation());
    r.set_failed_rank(-1);
    r.set_reason(reason);
    return core->ReportFailure(r).status();
  }

  absl::Status Leave(uint64_t member, bool job_completed = false) {
    v1::LeaveRequest r;
    r.set_job_id(core->job_id());
    r.set_member_id(member);
    r.set_job_completed(job_completed);
    return core->Leave(r);
  }

  // Advances the clock by `d` and ticks.
  void Advance(absl::Duration d) {
    clock.Advance(d);
    core->Tick();
  }

  FakeClock clock;
  MetricsRegistry metrics;
  std::unique_ptr<CoordinatorCore> core;
};

inline CoreOptions TestOptions() {
  CoreOptions o;
  o.job_id = "job";
  o.min_workers = 2;
  o.max_workers = 1024;
  o.settle = absl::Milliseconds(500);
  o.heartbeat_interval = absl::Seconds(1);
  o.lease_timeout = absl::Seconds(3);
  o.handoff_grace = absl::ZeroDuration();  // A joiner ends the generation at once.
  o.alignment = 4;
  return o;
}

// TestOptions serving a JobConfig with these limits (the core reads `steps`
// and `max_failures`; checkpoint_dir says whether a stop saves).
inline CoreOptions JobOptions(int64_t steps, int64_t max_failures = 20,
                              const std::string& checkpoint_dir = "") {
  CoreOptions o = TestOptions();
  JobConfig job;
  job.steps = steps;
  job.max_failures = max_failures;
  job.checkpoint_dir = checkpoint_dir;
  o.job_config_json = job.ToJson();
  return o;
}

}  // namespace zeroshard::server::testing
