// Elastic training with separate processes, as in Kubernetes: a
// zeroshard-coordinator and three zeroshard-worker processes; one worker is
// killed (kill -9) mid-run. The survivors report the failed collective, the
// coordinator forms a generation of two, they restore the latest committed
// checkpoint under the new shard plan and finish the job.
#include <signal.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/model/job_config.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"
#include "tests/trainer/step_log.h"
#include "worker/data/text_corpus.h"
#include "worker/trainer/step_record.h"

namespace zeroshard {
namespace {

using testing::BinPath;
using testing::MakeTempDir;
using testing::ReadFile;
using testing::ReadStepRecords;
using testing::WaitForGrpcAddress;
using testing::WaitForStep;

JobConfig ElasticJob(const std::string& dir, BackendChoice backend = BackendChoice::kAuto) {
  JobConfig job;
  job.backend = backend;
  job.model = "tiny";
  job.stage = 3;
  job.steps = 60;
  job.global_batch = 12;
  job.micro_batch = 4;
  job.data = DefaultDataPaths();
  job.eval_every = 0;
  job.checkpoint_dir = dir + "/ckpt";
  job.checkpoint_every = 4;
  job.log_path = dir + "/steps.jsonl";
  return job;
}

std::unique_ptr<ChildProcess> StartCoordinator(const std::string& dir, const JobConfig& job,
                                               const std::string& listen, int min_workers,
                                               int max_workers) {
  return std::make_unique<ChildProcess>(std::vector<std::string>{BinPath("zeroshard-coordinator"),
                                                                 "--listen",
                                                                 listen,
                                                                 "--metrics-listen",
                                                                 "",
                                                                 "--state-dir",
                                                                 dir + "/state",
                                                                 "--checkpoint-dir",
                                                                 job.checkpoint_dir,
                                                                 "--min-workers",
                                                                 std::to_string(min_workers),
                                                                 "--max-workers",
                                                                 std::to_string(max_workers),
                                                                 "--settle",
                                                                 "1",
                                                                 "--heartbeat-interval",
                                                                 "0.2",
                                                                 "--lease-timeout",
                                                                 "2",
                                                                 "--job-config-json",
                                                                 job.ToJson()},
                                        dir + "/coordinator.log");
}

std::vector<std::unique_ptr<ChildProcess>> StartWorkers(const std::string& dir,
                                                        const std::string& address, int n) {
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int i = 0; i < n; ++i) {
    workers.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{BinPath("zeroshard-worker"), "--coordinator", address,
                                 "--worker-id", absl::StrCat("w", i), "--threads", "1"},
        absl::StrCat(dir, "/worker-", i, ".log")));
  }
  return workers;
}

// One of 3 workers is killed (kill -9) after a few steps; the 2 survivors
// form a smaller generation from the latest checkpoint and finish.
void KillOneOfThree(BackendChoice backend) {
  const std::string dir = MakeTempDir("zs_elastic");
  const JobConfig job = ElasticJob(dir, backend);
  auto coordinator = StartCoordinator(dir, job, "127.0.0.1:0", 2, 3);
  const std::string address = WaitForGrpcAddress(dir + "/coordinator.log", absl::Seconds(20));
  ASSERT_FALSE(address.empty()) << ReadFile(dir + "/coordinator.log");
  auto workers = StartWorkers(dir, address, 3);
  // Kill one worker once the three-rank generation has taken a few steps.
  ASSERT_TRUE(WaitForStep(job.log_path, 10, 3)) << ReadFile(dir + "/worker-0.log");
  workers[2]->Signal(SIGKILL);
  EXPECT_EQ(workers[0]->Wait(absl::Seconds(120)), 0) << ReadFile(dir + "/worker-0.log");
  EXPECT_EQ(workers[1]->Wait(absl::Seconds(30)), 0) << ReadFile(dir + "/worker-1.log");

  const std::vector<StepRecord> records = ReadStepRecords(job.log_path);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.back().step, job.steps);
  EXPECT_EQ(records.back().world_size, 2);
  EXPECT_GT(records.back().generation, records.front().generation);
  // The smaller generation resumed from a checkpoint (a multiple of 4), not
  // from the start.
  int64_t first_of_new = -1;
  for (const StepRecord& r : records) {
    if (r.world_size == 2) {
      first_of_new = r.step;
      break;
    }
  }
  EXPECT_GT(first_of_new, 1);
  EXPECT_EQ((first_of_new - 1) % job.checkpoint_every, 0) << first_of_new;
  EXPECT_LT(records.back().loss, records.front().loss);
  coordinator->Signal(SIGTERM);
  EXPECT_EQ(coordinator->Wait(absl::Seconds(10)), 0);
}

TEST(ElasticTest, SurvivorsFinishInASmallerGenerationAfterAKill) {
  KillOneOfThree(BackendChoice::kAuto);
}

// The same over shared memory: the survivors see the dead rank's exit (or
// the coordinator's new generation) instead of a closed socket.
TEST(ElasticTest, SurvivorsFinishInASmallerGenerationAfterAKillOverShm) {
  KillOneOfThree(BackendChoice::kShm);
}

// The coordinator is killed (kill -9) mid-run and restarted on the same
// state dir and address: the workers learn they were forgotten, join again
// without operator action, and finish from the latest checkpoint.
TEST(ElasticTest, WorkersRejoinARestartedCoordinator) {
  const std::string dir = MakeTempDir("zs_restart");
  JobConfig job = ElasticJob(dir);
  job.steps = 80;
  auto coordinator = StartCoordinator(dir, job, "127.0.0.1:0", 2, 2);
  const std::string address = WaitForGrpcAddress(dir + "/coordinator.log", absl::Seconds(20));
  ASSERT_FALSE(address.empty()) << ReadFile(dir + "/coordinator.log");
  auto workers = StartWorkers(dir, address, 2);
  ASSERT_TRUE(WaitForStep(job.log_path, 10, 2)) << ReadFile(dir + "/worker-0.log");
  coordinator->Signal(SIGKILL);
  EXPECT_EQ(coordinator->Wait(absl::Seconds(10)), 128 + SIGKILL);
  coordinator = StartCoordinator(dir, job, address, 2, 2);
  EXPECT_EQ(workers[0]->Wait(absl::Seconds(120)), 0) << ReadFile(dir + "/worker-0.log");
  EXPECT_EQ(workers[1]->Wait(absl::Seconds(30)), 0) << ReadFile(dir + "/worker-1.log");
  const std::vector<StepRecord> records = ReadStepRecords(job.log_path);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.back().step, job.steps);
  EXPECT_GT(records.back().generation, records.front().generation);
  // Forgotten by the restarted coordinator, the workers joined again and
  // the new generation started from the latest checkpoint (the step log's
  // event, not a log line).
  const std::vector<StepRecord> restored = testing::WithEvent(records, "restored_checkpoint");
  ASSERT_FALSE(restored.empty()) << ReadFile(dir + "/worker-0.log");
  EXPECT_GT(restored.back().generation, records.front().generation);
  EXPECT_GT(restored.back().start_step, 0);
  coordinator->Signal(SIGTERM);
  EXPECT_EQ(coordinator->Wait(absl::Seconds(10)), 0);
}

}  // namespace
}  // namespace zeroshard
