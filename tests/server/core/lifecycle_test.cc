// The job lifecycle and failure handling of the coordinator's state
// machine, driven through CoordinatorCore with a FakeClock: a job completes
// at its last step and never forms a generation again (also after a
// restart on the same state dir), failures are counted against
// max_failures (scale events are not), and after a failure report a silent
// member is removed within two heartbeat intervals so exactly one new
// generation forms.
#include "absl/strings/str_cat.h"
#include "common/model/job_config.h"
#include "tests/server/core_test_util.h"
#include "tests/support/subprocess.h"

namespace zeroshard::server {
namespace {

using testing::CoreHarness;
using testing::JobOptions;
using testing::TestOptions;

void HeartbeatAll(CoreHarness& h, const std::vector<uint64_t>& ids) {
  for (uint64_t id : ids) ASSERT_TRUE(h.Heartbeat(id).ok()) << id;
}

absl::Status ReportStep(CoreHarness& h, uint64_t member, int rank, int64_t step) {
  return h.ReportStep(member, rank, step);
}

absl::Status ReportFailure(CoreHarness& h, uint64_t member) { return h.ReportFailure(member); }

absl::Status Leave(CoreHarness& h, uint64_t member, bool job_completed = false) {
  return h.Leave(member, job_completed);
}

v1::JobStatus Status(CoreHarness& h) {
  auto s = h.core->GetJobStatus({});
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : v1::JobStatus();
}

absl::Status JoinStatus(CoreHarness& h, const std::string& worker) {
  v1::JoinRequest r;
  r.set_job_id("job");
  r.set_worker_id(worker);
  return h.core->Join(r).status();
}

bool HasSample(CoreHarness& h, const std::string& sample) {
  return h.metrics.Render().find(sample + "\n") != std::string::npos;
}

TEST(LifecycleTest, EveryJobStateLabelIsExportedFromTheStart) {
  CoreHarness h(JobOptions(10, 20));
  EXPECT_EQ(h.core->job_state(), JobState::kWaiting);
  EXPECT_TRUE(HasSample(h, "zeroshard_job_state{state=\"waiting\"} 1"));
  for (const char* s : {"running", "completed", "failed"}) {
    EXPECT_TRUE(HasSample(h, absl::StrCat("zeroshard_job_state{state=\"", s, "\"} 0"))) << s;
  }
  EXPECT_TRUE(HasSample(h, "zeroshard_job_failures_total 0"));
  EXPECT_EQ(Status(h).job_state(), v1::JOB_STATE_WAITING);
  EXPECT_EQ(Status(h).max_failures(), 20);
  EXPECT_EQ(Status(h).steps(), 10);
}

TEST(LifecycleTest, TheLastStepCompletesTheJobAndNoGenerationFormsAgain) {
  CoreHarness h(JobOptions(5, 20));
  const uint64_t a = h.Join("a"), b = h.Join("b");
  h.Advance(absl::Seconds(1));
  ASSERT_EQ(h.core->job_state(), JobState::kRunning);
  ASSERT_TRUE(ReportStep(h, a, 0, 4).ok());
  EXPECT_EQ(h.core->job_state(), JobState::kRunning);
  ASSERT_TRUE(ReportStep(h, a, 0, 5).ok());
  // One rank's report is not the job's step ([Note: agreed step]).
  EXPECT_EQ(h.core->job_state(), JobState::kRunning);
  EXPECT_EQ(Status(h).step(), 0);
  ASSERT_TRUE(ReportStep(h, b, 1, 4).ok());
  EXPECT_EQ(Status(h).step(), 4);
  EXPECT_EQ(h.core->job_state(), JobState::kRunning);
  ASSERT_TRUE(ReportStep(h, b, 1, 5).ok());
  EXPECT_EQ(h.core->job_state(), JobState::kCompleted);
  // The generation keeps running so its members can finish the last
  // barrier and checkpoint; their reports are still taken.
  EXPECT_EQ(h.core->state(), GenerationState::kRunning);
  EXPECT_TRUE(ReportStep(h, a, 0, 5).ok());
  EXPECT_EQ(h.Info(b).job_state(), v1::JOB_STATE_COMPLETED);
  EXPECT_EQ(h.Heartbeat(b)->job_state(), v1::JOB_STATE_COMPLETED);
  const absl::Status late = JoinStatus(h, "late");
  EXPECT_TRUE(absl::IsFailedPrecondition(late)) << late;
  EXPECT_NE(late.message().find("completed"), std::string::npos) << late;
  ASSERT_TRUE(Leave(h, a, true).ok());
  ASSERT_TRUE(Leave(h, b, true).ok());
  for (int i = 0; i < 5; ++i) h.Advance(absl::Seconds(1));
  EXPECT_EQ(h.core->generation(), 1u);
  EXPECT_EQ(h.core->state(), GenerationState::kWaiting);
  const v1::JobStatus st = Status(h);
  EXPECT_EQ(st.job_state(), v1::JOB_STATE_COMPLETED);
  EXPECT_EQ(st.job_state_reason(), "step 5 of 5 done");
  EXPECT_TRUE(HasSample(h, "zeroshard_job_state{state=\"completed\"} 1"));
  EXPECT_TRUE(HasSample(h, "zeroshard_job_state{state=\"running\"} 0"));
}

// [Note: completion claims]
TEST(LifecycleTest, TheRanksLeavesAfterTheLastStepCompleteTheJobWhenTheirReportsWereLost) {
  CoreHarness h(JobOptions(5, 20));
  const uint64_t a = h.Join("a"), b = h.Join("b");
  h.Advance(absl::Seconds(1));
  const uint64_t waiting = h.Join("c");
  ASSERT_TRUE(Leave(h, waiting, true).ok());  // No rank: it trained nothing.
  EXPECT_EQ(h.core->job_state(), JobState::kRunning);
  ASSERT_TRUE(Leave(h, a, true).ok());
  // One rank's word is not enough; its Leave ended the generation, and the
  // other rank, now without a rank, still counts.
  EXPECT_NE(h.core->job_state(), JobState::kCompleted);
  EXPECT_EQ(h.core->state(), GenerationState::kWaiting);
  ASSERT_TRUE(Leave(h, b, true).ok());
  EXPECT_EQ(h.core->job_state(), JobState::kCompleted);
}

TEST(LifecycleTest, ACompletedLeaveOfOneRankAloneEndsNothing) {
  CoreHarness h(JobOptions(5, 20));
  const uint64_t a = h.Join("a"), b = h.Join("b");
  h.Advance(absl::Seconds(1));
  ASSERT_TRUE(Leave(h, a, true).ok());
  ASSERT_TRUE(Leave(h, b).ok());  // Not completed: it did not train the last step.
  EXPECT_EQ(h.core->job_state(), JobState::kWaiting);
}

TEST(LifecycleTest, AnEndedJobStaysEndedAcrossARestartUnlessItsConfigAllowsMore) {
  const std::string dir = zeroshard::testing::MakeTempDir("zs_lifecycle");
  {
    CoreHarness h(JobOptions(3, 20), dir);
    const uint64_t a = h.Join("a"), b = h.Join("b");
    h.Advance(absl::Seconds(1));
    ASSERT_TRUE(ReportStep(h, a, 0, 3).ok());
    ASSERT_TRUE(ReportStep(h, b, 1, 3).ok());
    ASSERT_EQ(h.core->job_state(), JobState::kCompleted);
  }
  {
    CoreHarness h(JobOptions(3, 20), dir);
    EXPECT_EQ(h.core->job_state(), JobState::kCompleted);
    EXPECT_TRUE(absl::IsFailedPrecondition(JoinStatus(h, "a")));
    h.Advance(absl::Seconds(5));
    EXPECT_EQ(h.core->state(), GenerationState::kWaiting);
    EXPECT_EQ(Status(h).job_state_reason(), "step 3 of 3 done");
  }
  {
    CoreHarness h(JobOptions(6, 20), dir);  // More steps: the job runs again.
    EXPECT_EQ(h.core->job_state(), JobState::kWaiting);
    h.Join("a");
    h.Join("b");
    h.Advance(absl::Seconds(1));
    EXPECT_EQ(h.core->job_state(), JobState::kRunning);
  }
}

TEST(LifecycleTest, FailuresPastMaxFailuresFailTheJobScaleEventsDoNotCount) {
  const std::string dir = zeroshard::testing::MakeTempDir("zs_budget");
  CoreHarness h(JobOptions(1000, 2), dir);
  std::vector<uint64_t> ids = {h.Join("a"), h.Join("b"), h.Join("c")};
  h.Advance(absl::Seconds(1));
  ASSERT_EQ(h.core->generation(), 1u);
  // Scale events: a joiner, then a graceful leave. Neither is a failure.
  const uint64_t d = h.Join("d");
  h.Advance(absl::Seconds(1));
  ASSERT_EQ(h.core->generation(), 2u);
  ASSERT_TRUE(Leave(h, d).ok());
  HeartbeatAll(h, ids);
  h.Advance(absl::Seconds(1));
  ASSERT_EQ(h.core->generation(), 3u);
  EXPECT_EQ(Status(h).failures(), 0);
  // Two failure reports: tolerated. Repeated reports of one failure count once.
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(ReportFailure(h, ids[0]).ok());
    EXPECT_TRUE(absl::IsAborted(ReportFailure(h, ids[1])));
    HeartbeatAll(h, ids);
    h.Advance(absl::Seconds(1));
    ASSERT_EQ(h.core->state(), GenerationState::kRunning) << i;
  }
  EXPECT_EQ(Status(h).failures(), 2);
  EXPECT_EQ(h.core->job_state(), JobState::kRunning);
  // A lost member (lease expiry) is the third failure: one past the budget.
  for (int i = 0; i < 4; ++i) {
    HeartbeatAll(h, {ids[0], ids[1]});
    h.Advance(absl::Seconds(1));
  }
  EXPECT_EQ(h.core->job_state(), JobState::kFailed);
  const v1::JobStatus st = Status(h);
  EXPECT_EQ(st.job_state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(st.failures(), 3);
  EXPECT_NE(st.job_state_reason().find("failure 3 exceeds max_failures 2"), std::string::npos)
      << st.job_state_reason();
  EXPECT_NE(st.job_state_reason().find("lease_expired"), std::string::npos);
  EXPECT_EQ(h.Info(ids[0]).job_state(), v1::JOB_STATE_FAILED);
  h.Advance(absl::Seconds(2));
  EXPECT_EQ(h.core->state(), GenerationState::kWaiting);  // Never forms again.
  EXPECT_TRUE(HasSample(h, "zeroshard_job_state{state=\"failed\"} 1"));
  EXPECT_TRUE(HasSample(h, "zeroshard_job_failures_total 3"));
  // Persisted: a restart with the same budget stays failed, a larger one reopens.
  h.core.reset();
  CoreHarness again(JobOptions(1000, 2), dir);
  EXPECT_EQ(again.core->job_state(), JobState::kFailed);
  EXPECT_EQ(Status(again).failures(), 3);
  again.core.reset();
  CoreHarness raised(JobOptions(1000, 5), dir);
  EXPECT_EQ(raised.core->job_state(), JobState::kWaiting);
}

// [Note: suspects after a failure]
TEST(LifecycleTest, AFailureReportRemovesTheSilentMemberSoOneGenerationForms) {
  CoreOptions o = JobOptions(1000, 20);
  o.lease_timeout = absl::Seconds(10);  // Far beyond the two heartbeat intervals.
  CoreHarness h(o);
  std::vector<uint64_t> ids = {h.Join("a"), h.Join("b"), h.Join("c"), h.Join("d")};
  h.Advance(absl::Seconds(1));
  ASSERT_EQ(h.core->generation(), 1u);
  HeartbeatAll(h, ids);
  h.Advance(absl::Milliseconds(300));  // d dies now: silent from here on.
  const std::vector<uint64_t> alive = {ids[0], ids[1], ids[2]};
  ASSERT_TRUE(ReportFailure(h, ids[0]).ok());
  const absl::Time reported = h.clock.Now();
  int formed = 0;
  absl::Duration formed_after;
  for (int tick = 1; tick <= 50; ++tick) {       // 5 s in 100 ms ticks.
    if (tick % 10 == 0) HeartbeatAll(h, alive);  // Every heartbeat interval.
    const uint64_t before = h.core->generation();
    h.Advance(absl::Milliseconds(100));
    if (h.core->generation() != before) {
      ++formed;
      formed_after = h.clock.Now() - reported;
    }
  }
  EXPECT_EQ(formed, 1);
  EXPECT_EQ(h.core->generation(), 2u);
  EXPECT_GE(formed_after, absl::Seconds(2));  // Two heartbeat intervals of silence.
  EXPECT_LE(formed_after, absl::Milliseconds(2100));
  EXPECT_EQ(h.Info(ids[0]).world_size(), 3);
  EXPECT_TRUE(absl::IsNotFound(h.Heartbeat(ids[3]).status()));
  EXPECT_TRUE(HasSample(h, "zeroshard_member_removals_total{reason=\"failure\"} 1"));
  EXPECT_EQ(Status(h).failures(), 1);  // The report and the removal are one failure.
}

TEST(LifecycleTest, AMemberWithoutARankCannotEndTheGenerationOrCountAFailure) {
  CoreHarness h(JobOptions(100, 0));  // One counted failure would fail the job.
  const uint64_t a = h.Join("a");
  h.Join("b");
  h.Advance(absl::Seconds(1));
  const uint64_t waiting = h.Join("c");  // Admitted only at the next generation.
  const uint64_t generation = h.core->generation();
  const absl::Status refused = h.ReportFailure(waiting);
  EXPECT_TRUE(absl::IsPermissionDenied(refused)) << refused;
  EXPECT_NE(refused.message().find("no rank"), std::string::npos) << refused;
  EXPECT_EQ(h.core->generation(), generation);
  EXPECT_EQ(h.core->state(), GenerationState::kRunning);
  EXPECT_EQ(h.core->job_state(), JobState::kRunning);
  ASSERT_TRUE(h.ReportFailure(a).ok());  // A rank's report still counts (positive control).
  EXPECT_EQ(h.core->job_state(), JobState::kFailed);
}

TEST(LifecycleTest, FailuresAfterCompletionAreNotCounted) {
  CoreHarness h(JobOptions(2, 0));
  const uint64_t a = h.Join("a"), b = h.Join("b");
  h.Advance(absl::Seconds(1));
  ASSERT_TRUE(ReportStep(h, a, 0, 2).ok());
  ASSERT_TRUE(ReportStep(h, b, 1, 2).ok());
  ASSERT_TRUE(ReportFailure(h, b).ok());  // A peer died in the final barrier.
  EXPECT_EQ(h.core->job_state(), JobState::kCompleted);
  EXPECT_EQ(Status(h).failures(), 0);
}

}  // namespace
}  // namespace zeroshard::server
