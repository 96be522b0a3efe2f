// Elastic training with separate processes, as in Kubernetes: a
// zeroshard-coordinator and three zeroshard-worker processes; one worker is
// killed (kill -9) mid-run. The survivors report the failed collective, the
// coordinator forms a generation of two, they restore the latest committed
// checkpoint under the new shard plan and finish the job.
#include <signal.h>

#include <fstream>
#include <map>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"
#include "worker/data/text_corpus.h"
#include "worker/trainer/job_config.h"
#include "worker/trainer/step_record.h"

namespace zeroshard {
namespace {

using testing::BinPath;
using testing::MakeTempDir;
using testing::ReadFile;

std::vector<StepRecord> Records(const std::string& path) {
  std::vector<StepRecord> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto r = StepRecord::FromJsonLine(line);
    if (r.ok()) out.push_back(*r);
  }
  return out;
}

std::string WaitForAddress(const std::string& log) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  std::smatch m;
  while (absl::Now() < deadline) {
    const std::string text = ReadFile(log);
    if (std::regex_search(text, m, std::regex("listening on (127\\.0\\.0\\.1:[0-9]+)"))) {
      return m[1].str();
    }
    absl::SleepFor(absl::Milliseconds(50));
  }
  return "";
}

TEST(ElasticTest, SurvivorsFinishInASmallerGenerationAfterAKill) {
  const std::string dir = MakeTempDir("zs_elastic");
  JobConfig job;
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
  ChildProcess coordinator(
      {BinPath("zeroshard-coordinator"), "--listen", "127.0.0.1:0", "--metrics-listen", "",
       "--state-dir", dir + "/state", "--checkpoint-dir", job.checkpoint_dir, "--min-workers",
       "2", "--max-workers", "3", "--settle", "1", "--heartbeat-interval", "0.2",
       "--lease-timeout", "2", "--job-config-json", job.ToJson()},
      dir + "/coordinator.log");
  const std::string address = WaitForAddress(dir + "/coordinator.log");
  ASSERT_FALSE(address.empty()) << ReadFile(dir + "/coordinator.log");
  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int i = 0; i < 3; ++i) {
    workers.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{BinPath("zeroshard-worker"), "--coordinator", address,
                                 "--worker-id", absl::StrCat("w", i), "--threads", "1"},
        absl::StrCat(dir, "/worker-", i, ".log")));
  }
  // Kill one worker once the three-rank generation has taken a few steps.
  const absl::Time deadline = absl::Now() + absl::Seconds(90);
  while (absl::Now() < deadline) {
    auto records = Records(job.log_path);
    if (!records.empty() && records.back().world_size == 3 && records.back().step >= 10) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_FALSE(Records(job.log_path).empty()) << ReadFile(dir + "/worker-0.log");
  workers[2]->Signal(SIGKILL);
  EXPECT_EQ(workers[0]->Wait(absl::Seconds(120)), 0) << ReadFile(dir + "/worker-0.log");
  EXPECT_EQ(workers[1]->Wait(absl::Seconds(30)), 0) << ReadFile(dir + "/worker-1.log");

  const std::vector<StepRecord> records = Records(job.log_path);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.back().step, job.steps);
  EXPECT_EQ(records.back().world_size, 2);
  EXPECT_GT(records.back().generation, records.front().generation);
  // The smaller generation resumed from a checkpoint (a multiple of 4), not
  // from the start.
  int64_t first_of_new = -1;
  for (const StepRecord& r : records) {
    if (r.world_size == 2) { first_of_new = r.step; break; }
  }
  EXPECT_GT(first_of_new, 1);
  EXPECT_EQ((first_of_new - 1) % job.checkpoint_every, 0) << first_of_new;
  EXPECT_LT(records.back().loss, records.front().loss);
  coordinator.Signal(SIGTERM);
  EXPECT_EQ(coordinator.Wait(absl::Seconds(10)), 0);
}

}  // namespace
}  // namespace zeroshard
