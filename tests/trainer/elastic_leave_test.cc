// Losing one of four workers, with real processes on loopback:
// - SIGTERM: the worker hands its shard to the others at its next step
//   boundary and exits 0 within 5 s; the others form one generation of
//   three, reshard live (no checkpoint read, no step trained twice) and
//   finish; a graceful leave is not a failure.
// - kill -9 while the coordinator holds no checkpoint (it serves the job
//   config's checkpoint_dir, nothing saved yet) and redundancy is off: the
//   survivors report the failed collective, the coordinator drops the silent
//   member within two heartbeat intervals, exactly one generation of three
//   forms, and they go on from step 0 to the end. Both tests print the
//   times they measure.
#include <signal.h>

#include <set>

#include "gtest/gtest.h"
#include "tests/trainer/job_processes.h"

namespace zeroshard {
namespace {

using testing::CoordinatorProcess;
using testing::GenerationOf;
using testing::ReadFile;
using testing::ReadStepRecords;
using testing::StartCoordinator;
using testing::StartWorker;
using testing::StatusJson;
using testing::WaitForStep;
using testing::WithEvent;

constexpr int kWorkers = 4;

std::vector<std::unique_ptr<ChildProcess>> StartWorkers(const std::string& dir,
                                                        const std::string& address) {
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int i = 0; i < kWorkers; ++i) {
    workers.push_back(StartWorker(dir, address, absl::StrCat("w", i)));
  }
  return workers;
}

// The first record at `world_size` ranks within 30 s of `since`; the time it took.
absl::Duration TimeToStepAt(const std::string& log, int world_size, absl::Time since) {
  return testing::TimeToStepAt(log, world_size, /*after=*/0, since, since + absl::Seconds(30));
}

void ExpectFinishedWithOneFewer(const JobConfig& job, const std::string& status) {
  const std::vector<StepRecord> records = ReadStepRecords(job.log_path);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.back().step, job.steps);
  EXPECT_EQ(records.back().world_size, kWorkers - 1);
  EXPECT_NE(status.find("\"job_state\": \"JOB_STATE_COMPLETED\""), std::string::npos) << status;
}

TEST(ElasticLeaveTest, SigtermLeavesWithinFiveSecondsAndTheRestFinishWithOneFewer) {
  const std::string dir = testing::MakeTempDir("zs_sigterm");
  JobConfig job = testing::SmallJob(dir, 150);
  job.checkpoint_dir = dir + "/ckpt";
  job.checkpoint_every = 5;
  CoordinatorProcess c = StartCoordinator(dir, job, 2, kWorkers, true, dir + "/coordinator.log");
  ASSERT_FALSE(c.address.empty()) << ReadFile(dir + "/coordinator.log");
  auto workers = StartWorkers(dir, c.address);
  ASSERT_TRUE(WaitForStep(job.log_path, 12, kWorkers)) << ReadFile(dir + "/w0.log");
  const int64_t before = GenerationOf(StatusJson(c.address));
  const absl::Time signalled = absl::Now();
  workers[2]->Signal(SIGTERM);
  const int code = workers[2]->Wait(absl::Seconds(5));
  const absl::Duration exit_after = absl::Now() - signalled;
  std::printf("SIGTERM to exit: %.3f s\n", absl::ToDoubleSeconds(exit_after));
  EXPECT_EQ(code, 0) << ReadFile(dir + "/w2.log");
  const absl::Duration next = TimeToStepAt(job.log_path, kWorkers - 1, signalled);
  std::printf("SIGTERM to the next step at N=%d: %.3f s\n", kWorkers - 1,
              absl::ToDoubleSeconds(next));
  EXPECT_EQ(workers[0]->Wait(absl::Seconds(40)), 0) << ReadFile(dir + "/w0.log");
  EXPECT_EQ(workers[1]->Wait(absl::Seconds(10)), 0) << ReadFile(dir + "/w1.log");
  const std::string status = StatusJson(c.address);
  ExpectFinishedWithOneFewer(job, status);
  EXPECT_NE(status.find("\"failures\": 0"), std::string::npos) << status;  // A scale event.
  // The leaver handed its shard off: the survivors resharded live, read no
  // checkpoint and trained no step twice.
  const std::vector<StepRecord> records = ReadStepRecords(job.log_path);
  const std::vector<StepRecord> left = WithEvent(records, "left");
  ASSERT_EQ(left.size(), 1u) << ReadFile(dir + "/w0.log");
  EXPECT_EQ(left[0].leaving.size(), 1u);
  EXPECT_EQ(left[0].world_size, kWorkers);
  const std::vector<StepRecord> live = WithEvent(records, "resharded_live");
  ASSERT_FALSE(live.empty()) << ReadFile(dir + "/w0.log");
  EXPECT_EQ(live.back().world_size, kWorkers - 1);
  EXPECT_EQ(live.back().start_step, left[0].step);
  EXPECT_TRUE(WithEvent(records, "restored_checkpoint").empty()) << ReadFile(dir + "/w0.log");
  std::set<int64_t> seen;
  for (const StepRecord& r : records) {
    EXPECT_TRUE(seen.insert(r.step).second) << "step " << r.step << " trained twice";
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), job.steps);
  // Exactly one generation formed after the leave (the coordinator's
  // count; ExpectFinishedWithOneFewer checked its world size).
  EXPECT_EQ(GenerationOf(status), before + 1) << status;
  c.process->Signal(SIGTERM);
  EXPECT_EQ(c.process->Wait(absl::Seconds(10)), 0);
}

TEST(ElasticLeaveTest, KillWithNoCheckpointFormsOneGenerationAndFinishesFromStepZero) {
  const std::string dir = testing::MakeTempDir("zs_kill_nockpt");
  JobConfig job = testing::SmallJob(dir, 150);
  job.checkpoint_dir = dir + "/ckpt";  // Served, but nothing is ever saved.
  CoordinatorProcess c = StartCoordinator(dir, job, 2, kWorkers, false, dir + "/coordinator.log");
  ASSERT_FALSE(c.address.empty()) << ReadFile(dir + "/coordinator.log");
  auto workers = StartWorkers(dir, c.address);
  ASSERT_TRUE(WaitForStep(job.log_path, 12, kWorkers)) << ReadFile(dir + "/w0.log");
  const int64_t before = GenerationOf(StatusJson(c.address));
  const absl::Time killed = absl::Now();
  workers[2]->Signal(SIGKILL);
  const absl::Duration next = TimeToStepAt(job.log_path, kWorkers - 1, killed);
  std::printf("kill -9 to the next completed step at N=%d: %.3f s\n", kWorkers - 1,
              absl::ToDoubleSeconds(next));
  EXPECT_LT(next, absl::Seconds(5));  // Under the 5 s lease: no wait for it.
  EXPECT_EQ(workers[0]->Wait(absl::Seconds(40)), 0) << ReadFile(dir + "/w0.log");
  EXPECT_EQ(workers[1]->Wait(absl::Seconds(10)), 0) << ReadFile(dir + "/w1.log");
  const std::string status = StatusJson(c.address);
  ExpectFinishedWithOneFewer(job, status);
  EXPECT_NE(status.find("\"failures\": 1,"), std::string::npos) << status;
  EXPECT_EQ(GenerationOf(status), before + 1) << "exactly one generation of three: " << status;
  // From step 0 again: nothing was saved, so the new generation started
  // from the seeded init (the step log's event), not from a checkpoint.
  const std::vector<StepRecord> records = ReadStepRecords(job.log_path);
  for (const StepRecord& r : records) {
    if (r.world_size == kWorkers - 1) {
      EXPECT_EQ(r.step, 1);
      EXPECT_EQ(r.events, std::vector<std::string>{"initialized"});
      break;
    }
  }
  EXPECT_TRUE(WithEvent(records, "restored_checkpoint").empty());
  c.process->Signal(SIGTERM);
  EXPECT_EQ(c.process->Wait(absl::Seconds(10)), 0);
}

}  // namespace
}  // namespace zeroshard
