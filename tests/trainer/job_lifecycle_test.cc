// A job that ends, with real processes on loopback: two workers train a
// short job to its last step and exit 0; the coordinator marks it completed
// (status --json and /metrics). Workers started afterwards are told the job
// is done and exit 0 at once, and no generation forms, also after the
// coordinator restarts on the same state dir. A job with max_failures 0
// fails at its first lost worker: the others exit 1 naming the cause.
#include <signal.h>

#include "gtest/gtest.h"
#include "tests/trainer/job_processes.h"

namespace zeroshard {
namespace {

using testing::CoordinatorProcess;
using testing::MetricValue;
using testing::ReadFile;
using testing::StartCoordinator;
using testing::StartWorker;
using testing::StatusJson;

TEST(JobLifecycleTest, ACompletedJobTurnsLateWorkersAwayAndFormsNoGeneration) {
  const std::string dir = testing::MakeTempDir("zs_completed");
  const JobConfig job = testing::SmallJob(dir, 8);
  CoordinatorProcess c = StartCoordinator(dir, job, 2, 2, false, dir + "/coordinator.log");
  ASSERT_FALSE(c.address.empty()) << ReadFile(dir + "/coordinator.log");
  ASSERT_GT(c.metrics_port, 0) << ReadFile(dir + "/coordinator.log");
  EXPECT_EQ(MetricValue(c.metrics_port, "zeroshard_job_state{state=\"waiting\"}"), "1");
  EXPECT_EQ(MetricValue(c.metrics_port, "zeroshard_job_state{state=\"completed\"}"), "0");
  auto a = StartWorker(dir, c.address, "a");
  auto b = StartWorker(dir, c.address, "b");
  ASSERT_EQ(a->Wait(absl::Seconds(40)), 0) << ReadFile(dir + "/a.log");
  ASSERT_EQ(b->Wait(absl::Seconds(10)), 0) << ReadFile(dir + "/b.log");
  std::string status = StatusJson(c.address);
  EXPECT_NE(status.find("\"job_state\": \"JOB_STATE_COMPLETED\""), std::string::npos) << status;
  EXPECT_NE(status.find("\"generation\": 1,"), std::string::npos) << status;
  EXPECT_EQ(MetricValue(c.metrics_port, "zeroshard_job_state{state=\"completed\"}"), "1");
  EXPECT_EQ(MetricValue(c.metrics_port, "zeroshard_job_state{state=\"running\"}"), "0");

  // Restarted workers (as a StatefulSet restarts them): one line, exit 0.
  const absl::Time start = absl::Now();
  auto late_a = StartWorker(dir, c.address, "late-a");
  auto late_b = StartWorker(dir, c.address, "late-b");
  EXPECT_EQ(late_a->Wait(absl::Seconds(15)), 0) << ReadFile(dir + "/late-a.log");
  EXPECT_EQ(late_b->Wait(absl::Seconds(15)), 0) << ReadFile(dir + "/late-b.log");
  std::printf("late workers exited after %.2f s\n", absl::ToDoubleSeconds(absl::Now() - start));
  EXPECT_NE(ReadFile(dir + "/late-a.log").find("is already completed (step 8 of 8 done)"),
            std::string::npos)
      << ReadFile(dir + "/late-a.log");
  status = StatusJson(c.address);
  EXPECT_NE(status.find("\"generation\": 1,"), std::string::npos) << status;  // None formed.
  EXPECT_NE(status.find("\"world_size\": 0"), std::string::npos) << status;

  // A restarted coordinator remembers: still completed, still no generation.
  c.process->Signal(SIGTERM);
  ASSERT_EQ(c.process->Wait(absl::Seconds(10)), 0);
  c = StartCoordinator(dir, job, 2, 2, false, dir + "/coordinator-2.log");
  ASSERT_FALSE(c.address.empty()) << ReadFile(dir + "/coordinator-2.log");
  auto after_a = StartWorker(dir, c.address, "after-a");
  auto after_b = StartWorker(dir, c.address, "after-b");
  EXPECT_EQ(after_a->Wait(absl::Seconds(15)), 0) << ReadFile(dir + "/after-a.log");
  EXPECT_EQ(after_b->Wait(absl::Seconds(15)), 0) << ReadFile(dir + "/after-b.log");
  status = StatusJson(c.address);
  EXPECT_NE(status.find("\"job_state\": \"JOB_STATE_COMPLETED\""), std::string::npos) << status;
  EXPECT_NE(status.find("\"generation_changes\": 0"), std::string::npos) << status;
  EXPECT_EQ(MetricValue(c.metrics_port, "zeroshard_job_state{state=\"completed\"}"), "1");
  EXPECT_EQ(MetricValue(c.metrics_port, "zeroshard_workers"), "0");
  c.process->Signal(SIGTERM);
  EXPECT_EQ(c.process->Wait(absl::Seconds(10)), 0);
}

TEST(JobLifecycleTest, PastMaxFailuresTheJobFailsAndWorkersExitOneNamingIt) {
  const std::string dir = testing::MakeTempDir("zs_failed");
  JobConfig job = testing::SmallJob(dir, 1000);
  job.max_failures = 0;
  CoordinatorProcess c = StartCoordinator(dir, job, 2, 3, false, dir + "/coordinator.log");
  ASSERT_FALSE(c.address.empty()) << ReadFile(dir + "/coordinator.log");
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (const char* w : {"w0", "w1", "w2"}) workers.push_back(StartWorker(dir, c.address, w));
  ASSERT_TRUE(testing::WaitForStep(job.log_path, 5, 3)) << ReadFile(dir + "/w0.log");
  workers[2]->Signal(SIGKILL);
  const std::string cause = "failed: failure 1 exceeds max_failures 0";
  for (int i = 0; i < 2; ++i) {
    const std::string log = absl::StrCat(dir, "/w", i, ".log");
    EXPECT_EQ(workers[i]->Wait(absl::Seconds(20)), 1) << ReadFile(log);
    EXPECT_NE(ReadFile(log).find(cause), std::string::npos) << ReadFile(log);
  }
  const std::string status = StatusJson(c.address);
  EXPECT_NE(status.find("\"job_state\": \"JOB_STATE_FAILED\""), std::string::npos) << status;
  EXPECT_EQ(MetricValue(c.metrics_port, "zeroshard_job_state{state=\"failed\"}"), "1");
  auto late = StartWorker(dir, c.address, "late");
  EXPECT_EQ(late->Wait(absl::Seconds(15)), 1) << ReadFile(dir + "/late.log");
  EXPECT_NE(ReadFile(dir + "/late.log").find(cause), std::string::npos);
  c.process->Signal(SIGTERM);
  EXPECT_EQ(c.process->Wait(absl::Seconds(10)), 0);
}

}  // namespace
}  // namespace zeroshard
