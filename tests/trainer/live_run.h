// Helpers for the live-resharding process tests: a coordinator and worker
// processes on loopback for a job with no checkpoints (unless asked), and
// step-log checks.
#pragma once

#include <signal.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/model/job_config.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"
#include "tests/trainer/job_processes.h"
#include "tests/trainer/step_log.h"
#include "worker/data/text_corpus.h"
#include "worker/trainer/step_record.h"

namespace zeroshard {

using testing::BinPath;
using testing::MakeTempDir;
using testing::ReadFile;
using testing::ReadStepRecords;
using testing::WaitForGrpcAddress;
using testing::WaitForStep;
using testing::WithEvent;

// job_processes.h's small job, in micro-batches of 3 (every rank of 1-4
// runs whole micro-batches).
inline JobConfig LiveJob(const std::string& dir) {
  JobConfig job = testing::SmallJob(dir, 40);
  job.micro_batch = 3;
  return job;
}

struct LiveRun {
  std::string dir;
  std::unique_ptr<ChildProcess> coordinator;
  std::string address;
  std::vector<std::unique_ptr<ChildProcess>> workers;

  // Starts the coordinator for `job` (whose log lies under `run_dir`), with
  // short timeouts (heartbeat 0.2 s, settle 0.5 s, lease 2 s) or, with
  // `default_timeouts`, the coordinator's own (1 s, 1 s, 5 s).
  bool Start(const std::string& run_dir, const JobConfig& job, int min_workers,
             bool default_timeouts = false) {
    dir = run_dir;
    std::vector<std::string> argv = {BinPath("zeroshard-coordinator"),
                                     "--listen",
                                     "127.0.0.1:0",
                                     "--metrics-listen",
                                     "",
                                     "--min-workers",
                                     std::to_string(min_workers),
                                     "--max-workers",
                                     "4",
                                     "--job-config-json",
                                     job.ToJson()};
    if (!default_timeouts) {
      for (const char* a :
           {"--settle", "0.5", "--heartbeat-interval", "0.2", "--lease-timeout", "2"}) {
        argv.push_back(a);
      }
    }
    coordinator = std::make_unique<ChildProcess>(argv, dir + "/coordinator.log");
    address = WaitForGrpcAddress(dir + "/coordinator.log", absl::Seconds(20));
    return !address.empty();
  }
  // Worker k is "w<k>", logging to w<k>.log (job_processes.h's StartWorker).
  void AddWorkers(int n) {
    for (int i = 0; i < n; ++i) {
      workers.push_back(testing::StartWorker(dir, address, absl::StrCat("w", workers.size())));
    }
  }
  std::string WorkerLog(size_t k) const { return ReadFile(absl::StrCat(dir, "/w", k, ".log")); }
  std::string Logs() const {
    std::string out = ReadFile(dir + "/coordinator.log");
    for (size_t k = 0; k < workers.size(); ++k) {
      out += absl::StrCat("\n--- worker ", k, "\n", WorkerLog(k));
    }
    return out;
  }
  void Stop() {
    coordinator->Signal(SIGTERM);
    EXPECT_EQ(coordinator->Wait(absl::Seconds(10)), 0);
  }
};

// Step -> loss; fails the test if any step appears twice, or if more than
// `max_missing` of the job's steps have no record.
inline std::map<int64_t, double> LossesOnce(const std::vector<StepRecord>& records, int64_t steps,
                                            int64_t max_missing = 0) {
  std::map<int64_t, double> out;
  for (const StepRecord& r : records) {
    EXPECT_TRUE(out.emplace(r.step, r.loss).second) << "step " << r.step << " trained twice";
  }
  EXPECT_LE(static_cast<int64_t>(out.size()), steps);
  EXPECT_GE(static_cast<int64_t>(out.size()), steps - max_missing);
  return out;
}

// Every step of `got` has `ref`'s loss within `tolerance` relative; steps `got`
// has no record of are skipped (LossesOnce bounds how many may be missing:
// a kill between a peer-copy refresh and the step record loses the record,
// not the step).
inline void ExpectSameLosses(const std::map<int64_t, double>& got,
                             const std::map<int64_t, double>& ref, double tolerance = 1e-5) {
  double worst = 0;
  int64_t compared = 0;
  for (const auto& [step, loss] : ref) {
    auto it = got.find(step);
    if (it == got.end()) continue;
    ++compared;
    worst = std::max(worst, std::fabs(it->second - loss) / std::fabs(loss));
  }
  std::printf("losses vs the uninterrupted 4-worker run: %ld steps, max relative difference %.2e\n",
              static_cast<long>(compared), worst);
  EXPECT_GT(compared, 0);
  EXPECT_EQ(compared, static_cast<int64_t>(got.size())) << "steps the reference run has not";
  EXPECT_LE(worst, tolerance);
}

// The losses of `base` run from start to end by `workers` workers.
inline std::map<int64_t, double> Uninterrupted(const JobConfig& base, int workers) {
  LiveRun run;
  const std::string dir = MakeTempDir("zs_live_ref");
  JobConfig job = base;
  job.log_path = dir + "/steps.jsonl";
  if (!job.checkpoint_dir.empty()) job.checkpoint_dir = dir + "/ckpt";
  if (!run.Start(dir, job, workers)) {
    ADD_FAILURE() << run.Logs();
    return {};
  }
  run.AddWorkers(workers);
  for (auto& w : run.workers) EXPECT_EQ(w->Wait(absl::Seconds(120)), 0) << run.Logs();
  run.Stop();
  return LossesOnce(ReadStepRecords(job.log_path), job.steps);
}

}  // namespace zeroshard
