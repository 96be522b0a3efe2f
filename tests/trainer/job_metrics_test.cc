// The coordinator's /metrics after a real job, with processes on loopback:
// two workers (POD_NAME set as the Downward API sets it) train 40 steps
// with a checkpoint every 20, under a clip threshold low enough that every step
// clips. Expected values come from the job config and what is on disk:
// tokens = steps x global_batch x n_ctx (counted once per step, not per
// rank), 2 saves whose bytes are the data files' sizes, last step 40, the
// clip count = steps, grad norms from the step log, one rank_info series
// per rank with its pod and hostname while running, RSS per rank, and the
// coordinator's process metrics.
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "gtest/gtest.h"
#include "tests/support/exposition.h"
#include "tests/support/file_watch.h"
#include "tests/trainer/job_processes.h"

namespace zeroshard {
namespace {

namespace fs = std::filesystem;
using testing::ParseExposition;
using testing::ReadFile;
using testing::Sample;
using testing::Samples;

constexpr int64_t kSteps = 40;
constexpr int kTinyContext = 16;  // model_config.cc: "tiny" has n_ctx 16.

Samples Scrape(int port) {
  return ParseExposition(server::testing::HttpGet(port, "/metrics").body);
}

// Data bytes of every committed checkpoint: the files beside each manifest.
double CheckpointDataBytes(const std::string& dir) {
  double bytes = 0;
  for (const auto& step : fs::directory_iterator(dir)) {
    if (step.path().filename().string().rfind("step-", 0) != 0) continue;
    for (const auto& f : fs::directory_iterator(step.path())) {
      if (f.path().extension() != ".json") bytes += static_cast<double>(fs::file_size(f.path()));
    }
  }
  return bytes;
}

// One rank_info series per rank (pod from POD_NAME, host the machine's)
// and an RSS per rank, in a scrape taken while the job runs.
void CheckRunningSeries(const Samples& m) {
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof(host) - 1), 0);
  auto info = [&](const char* rank, const char* worker, const char* pod) {
    return absl::StrCat("zeroshard_rank_info{host=\"", host, "\",pod=\"", pod, "\",rank=\"", rank,
                        "\",worker_id=\"", worker, "\"}");
  };
  const bool a_is_0 = Sample(m, info("0", "a", "zs-worker-a")).has_value();
  EXPECT_EQ(Sample(m, info(a_is_0 ? "0" : "1", "a", "zs-worker-a")), 1.0);
  EXPECT_EQ(Sample(m, info(a_is_0 ? "1" : "0", "b", "")), 1.0);
  EXPECT_EQ(testing::CountSeries(m, "zeroshard_rank_info"), 2);
  for (const char* rank : {"0", "1"}) {
    const auto rss = Sample(m, std::string("zeroshard_worker_rss_bytes{rank=\"") + rank + "\"}");
    ASSERT_TRUE(rss.has_value()) << rank;
    EXPECT_GT(*rss, 1 << 20) << rank;  // A real process, far above a MiB.
    EXPECT_LT(*rss, 4e9) << rank;
  }
}

// After the job: the totals against the config, the disk and the step log.
void CheckFinalMetrics(const Samples& m, const JobConfig& job) {
  std::printf(
      "tokens_total %.0f, checkpoint bytes %.0f in %.0f saves, %.3f s saving, grad_norm "
      "%.4g clipped to %.4g\n",
      Sample(m, "zeroshard_tokens_total").value_or(-1),
      Sample(m, "zeroshard_checkpoint_bytes_total").value_or(-1),
      Sample(m, "zeroshard_checkpoint_saves_total").value_or(-1),
      Sample(m, "zeroshard_checkpoint_save_seconds_sum").value_or(-1),
      Sample(m, "zeroshard_grad_norm").value_or(-1),
      Sample(m, "zeroshard_grad_norm_clipped").value_or(-1));
  EXPECT_EQ(Sample(m, "zeroshard_tokens_total"),
            static_cast<double>(kSteps * job.global_batch * kTinyContext));
  EXPECT_EQ(Sample(m, "zeroshard_grad_clips_total"), static_cast<double>(kSteps));
  const std::vector<StepRecord> records = testing::ReadStepRecords(job.log_path);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.back().step, kSteps);
  const auto norm = Sample(m, "zeroshard_grad_norm");
  ASSERT_TRUE(norm.has_value());
  EXPECT_NEAR(*norm, records.back().grad_norm, 1e-6 * records.back().grad_norm);
  // clip_grad_norm_'s coefficient: max_norm / (norm + 1e-6).
  EXPECT_NEAR(*Sample(m, "zeroshard_grad_norm_clipped"), *norm * job.max_grad_norm / (*norm + 1e-6),
              1e-9);
  EXPECT_EQ(Sample(m, "zeroshard_checkpoint_saves_total"), 2.0);
  EXPECT_EQ(Sample(m, "zeroshard_checkpoint_last_step"), static_cast<double>(kSteps));
  EXPECT_EQ(Sample(m, "zeroshard_checkpoint_save_seconds_count"), 2.0);
  EXPECT_EQ(Sample(m, "zeroshard_checkpoint_bytes_total"), CheckpointDataBytes(job.checkpoint_dir));
  EXPECT_GT(*Sample(m, "zeroshard_checkpoint_bytes_total"), 0);
  EXPECT_EQ(Sample(m, "zeroshard_tokens_per_second"), 0.0);  // The job is over.
  EXPECT_GT(*Sample(m, "process_cpu_seconds_total"), 0);
  EXPECT_GT(*Sample(m, "process_resident_memory_bytes"), 1 << 20);
  EXPECT_GT(*Sample(m, "process_open_fds"), 3);
}

TEST(JobMetricsTest, MetricsMatchWhatTheJobDid) {
  const std::string dir = testing::MakeTempDir("zs_job_metrics");
  JobConfig job = testing::SmallJob(dir, kSteps);
  job.checkpoint_dir = dir + "/ckpt";
  job.checkpoint_every = 20;
  job.max_grad_norm = 1e-3;  // Far below any real norm: every step clips.
  testing::CoordinatorProcess c =
      testing::StartCoordinator(dir, job, 2, 2, true, dir + "/coordinator.log");
  ASSERT_FALSE(c.address.empty()) << ReadFile(dir + "/coordinator.log");
  ASSERT_GT(c.metrics_port, 0);
  Samples m = Scrape(c.metrics_port);
  EXPECT_EQ(Sample(m, "zeroshard_tokens_total"), 0.0);
  EXPECT_EQ(Sample(m, "zeroshard_checkpoint_saves_total"), 0.0);
  EXPECT_EQ(Sample(m, "zeroshard_checkpoint_failures_total{reason=\"disk_full\"}"), 0.0);
  EXPECT_FALSE(Sample(m, "zeroshard_checkpoint_last_step").has_value());
  EXPECT_FALSE(Sample(m, "zeroshard_loss").has_value());

  ::setenv("POD_NAME", "zs-worker-a", 1);  // The child inherits it.
  auto a = testing::StartWorker(dir, c.address, "a");
  ::unsetenv("POD_NAME");
  auto b = testing::StartWorker(dir, c.address, "b");
  // While running (a scrape after both ranks reported a step): one
  // rank_info series per rank, pod from POD_NAME, host the machine's.
  // Scraped again on each write to the step log: each rank's first report
  // may land a moment after its step's record, and the next records follow.
  testing::WaitForFiles(
      testing::DirOf(job.log_path),
      [&] {
        m = Scrape(c.metrics_port);
        return Sample(m, "zeroshard_step").value_or(0) >= 1 &&
               testing::CountSeries(m, "zeroshard_rank_info") > 0 &&
               testing::CountSeries(m, "zeroshard_worker_rss_bytes") >= 2;
      },
      absl::Seconds(40));
  CheckRunningSeries(m);

  ASSERT_EQ(a->Wait(absl::Seconds(60)), 0) << ReadFile(dir + "/a.log");
  ASSERT_EQ(b->Wait(absl::Seconds(20)), 0) << ReadFile(dir + "/b.log");
  CheckFinalMetrics(Scrape(c.metrics_port), job);
  c.process->Signal(SIGTERM);
  EXPECT_EQ(c.process->Wait(absl::Seconds(10)), 0);
}

}  // namespace
}  // namespace zeroshard
