// An operator's stop (CoordinatorCore::StopJob), driven with a FakeClock:
// the running ranks learn it from their heartbeats and their Leave with
// job_completed ends the job "stopped by request at step N"; without enough
// members to train the job ends at once; an ended job refuses a stop; and a
// stopped job stays stopped across a restart unless its config raises
// `steps` above the config it was stopped under.
#include "common/model/job_config.h"
#include "tests/server/core_test_util.h"
#include "tests/support/subprocess.h"

namespace zeroshard::server {
namespace {

using testing::CoreHarness;
using testing::JobOptions;

absl::StatusOr<v1::StopJobResponse> Stop(CoreHarness& h) { return h.core->StopJob({}); }

absl::Status ReportStep(CoreHarness& h, uint64_t member, int rank, int64_t step) {
  return h.ReportStep(member, rank, step);
}

absl::Status Leave(CoreHarness& h, uint64_t member, bool job_completed) {
  return h.Leave(member, job_completed);
}

std::string Reason(CoreHarness& h) {
  auto s = h.core->GetJobStatus({});
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? s->job_state_reason() : "";
}

TEST(StopJobTest, TheRanksHearOfItAndTheirCompletedLeaveEndsTheJobAtTheirStep) {
  CoreHarness h(JobOptions(1000, 20, "/ckpt"));
  const uint64_t a = h.Join("a"), b = h.Join("b");
  h.Advance(absl::Seconds(1));
  ASSERT_EQ(h.core->job_state(), JobState::kRunning);
  ASSERT_TRUE(ReportStep(h, a, 0, 7).ok());
  ASSERT_TRUE(ReportStep(h, b, 1, 7).ok());
  EXPECT_FALSE(h.Heartbeat(a)->stop_requested());

  auto stop = Stop(h);
  ASSERT_TRUE(stop.ok()) << stop.status();
  EXPECT_EQ(stop->job_state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(stop->last_step(), 7);
  EXPECT_TRUE(stop->saves_checkpoint());
  EXPECT_TRUE(Stop(h).ok()) << "a second stop is harmless";
  EXPECT_TRUE(h.Heartbeat(a)->stop_requested());
  EXPECT_TRUE(h.Heartbeat(b)->stop_requested());
  // The ranks train one more step, save it and leave as done.
  ASSERT_TRUE(ReportStep(h, a, 0, 8).ok());
  ASSERT_TRUE(ReportStep(h, b, 1, 8).ok());
  EXPECT_EQ(h.core->job_state(), JobState::kRunning);
  ASSERT_TRUE(Leave(h, a, /*job_completed=*/true).ok());
  EXPECT_EQ(h.core->job_state(), JobState::kCompleted);
  EXPECT_EQ(Reason(h), "stopped by request at step 8");
  ASSERT_TRUE(Leave(h, b, /*job_completed=*/true).ok());
  EXPECT_EQ(Reason(h), "stopped by request at step 8");

  const auto again = Stop(h);
  EXPECT_TRUE(absl::IsFailedPrecondition(again.status())) << again.status();
  EXPECT_NE(again.status().message().find("already ended"), std::string::npos);
}

TEST(StopJobTest, ACompletedLeaveOfAMemberWithoutARankDoesNotEndIt) {
  CoreHarness h(JobOptions(1000));
  const uint64_t a = h.Join("a");
  h.Join("b");
  h.Advance(absl::Seconds(1));
  const uint64_t waiting = h.Join("c");
  auto stop = Stop(h);
  ASSERT_TRUE(stop.ok()) << stop.status();
  EXPECT_FALSE(stop->saves_checkpoint());
  ASSERT_TRUE(Leave(h, waiting, true).ok());
  EXPECT_EQ(h.core->job_state(), JobState::kRunning);
  ASSERT_TRUE(Leave(h, a, true).ok());
  EXPECT_EQ(h.core->job_state(), JobState::kCompleted);
}

TEST(StopJobTest, WithTooFewMembersToTrainTheJobEndsAtOnce) {
  CoreHarness h(JobOptions(1000));  // min_workers 2.
  h.Join("a");
  auto stop = Stop(h);
  ASSERT_TRUE(stop.ok()) << stop.status();
  EXPECT_EQ(stop->job_state(), v1::JOB_STATE_COMPLETED);
  EXPECT_EQ(Reason(h), "stopped by request at step 0");
}

TEST(StopJobTest, ARankLostBeforeTheBoundaryDoesNotLeaveTheStopHanging) {
  CoreHarness h(JobOptions(1000));  // min_workers 2.
  const uint64_t a = h.Join("a"), b = h.Join("b");
  h.Advance(absl::Seconds(1));
  ASSERT_EQ(h.core->job_state(), JobState::kRunning);
  ASSERT_TRUE(ReportStep(h, a, 0, 3).ok());
  ASSERT_TRUE(ReportStep(h, b, 1, 3).ok());
  ASSERT_TRUE(Stop(h).ok());
  // b dies before the step boundary: only a heartbeats until b's lease ends.
  for (int i = 0; i < 5 && h.core->job_state() != JobState::kCompleted; ++i) {
    ASSERT_TRUE(h.Heartbeat(a).ok());
    h.Advance(absl::Seconds(1));
  }
  EXPECT_EQ(h.core->job_state(), JobState::kCompleted) << "one member cannot form a generation";
  EXPECT_EQ(Reason(h), "stopped by request at step 3");
  EXPECT_EQ(h.Heartbeat(a)->job_state(), v1::JOB_STATE_COMPLETED);
}

TEST(StopJobTest, RanksWhoseCompletedLeaveDidNotCountStillEndIt) {
  CoreHarness h(JobOptions(1000));
  const uint64_t a = h.Join("a"), b = h.Join("b");
  h.Advance(absl::Seconds(1));
  ASSERT_TRUE(Stop(h).ok());
  // Their Leave RPCs were lost: the members' leases run out.
  for (int i = 0; i < 6 && h.core->job_state() != JobState::kCompleted; ++i) {
    h.Advance(absl::Seconds(1));
  }
  EXPECT_EQ(h.core->job_state(), JobState::kCompleted);
  (void)a;
  (void)b;
}

TEST(StopJobTest, ARequestForAnotherJobIsRefused) {
  CoreHarness h(JobOptions(1000));
  v1::StopJobRequest r;
  r.set_job_id("other");
  const absl::Status refused = h.core->StopJob(r).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_NE(refused.message().find("not this coordinator's job"), std::string::npos) << refused;
  EXPECT_EQ(h.core->job_state(), JobState::kWaiting);
}

TEST(StopJobTest, AStoppedJobStaysStoppedAcrossARestartUnlessItsStepsAreRaised) {
  const std::string dir = zeroshard::testing::MakeTempDir("zs_stop_job");
  {
    CoreHarness h(JobOptions(100), dir);
    const uint64_t a = h.Join("a"), b = h.Join("b");
    h.Advance(absl::Seconds(1));
    ASSERT_TRUE(ReportStep(h, a, 0, 40).ok());
    ASSERT_TRUE(ReportStep(h, b, 1, 40).ok());
    ASSERT_TRUE(Stop(h).ok());
    ASSERT_TRUE(Leave(h, a, true).ok());
    ASSERT_EQ(h.core->job_state(), JobState::kCompleted);
  }
  {
    CoreHarness h(JobOptions(100), dir);  // The same config: 100 > step 40, still stopped.
    EXPECT_EQ(h.core->job_state(), JobState::kCompleted);
    EXPECT_EQ(Reason(h), "stopped by request at step 40");
  }
  {
    CoreHarness h(JobOptions(150), dir);  // Raised: the operator wants more.
    EXPECT_EQ(h.core->job_state(), JobState::kWaiting);
  }
}

}  // namespace
}  // namespace zeroshard::server
