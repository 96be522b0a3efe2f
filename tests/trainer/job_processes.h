// Shared by the multi-process job tests (lifecycle, graceful leave, kill):
// a zeroshard-coordinator and zeroshard-worker processes on loopback,
// started and stopped by PID, and what the tests read back from them (the
// step log, `zeroshard status --json`, /metrics). Every wait is bounded.
#pragma once

#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/model/job_config.h"
#include "tests/server/http_get.h"
#include "tests/support/subprocess.h"
#include "tests/trainer/step_log.h"
#include "worker/data/text_corpus.h"

namespace zeroshard::testing {

// A small, fast job: ~20 ms steps for the tiny model on loopback.
inline JobConfig SmallJob(const std::string& dir, int64_t steps) {
  JobConfig job;
  job.model = "tiny";
  job.stage = 3;
  job.steps = steps;
  job.global_batch = 12;
  job.micro_batch = 4;
  job.data = DefaultDataPaths();
  job.eval_every = 0;
  job.log_path = dir + "/steps.jsonl";
  return job;
}

struct CoordinatorProcess {
  std::unique_ptr<ChildProcess> process;
  std::string address;  // gRPC HOST:PORT, "" if it did not come up.
  int metrics_port = 0;
};

// `checkpoint_dir_flag`: pass --checkpoint-dir job.checkpoint_dir (without
// it the coordinator serves the job config's checkpoint_dir, if any).
inline CoordinatorProcess StartCoordinator(const std::string& dir, const JobConfig& job,
                                           int min_workers, int max_workers,
                                           bool checkpoint_dir_flag, const std::string& log) {
  std::vector<std::string> argv = {BinPath("zeroshard-coordinator"),
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--metrics-listen",
                                   "127.0.0.1:0",
                                   "--state-dir",
                                   dir + "/state",
                                   "--min-workers",
                                   std::to_string(min_workers),
                                   "--max-workers",
                                   std::to_string(max_workers),
                                   "--settle",
                                   "0.5",
                                   "--heartbeat-interval",
                                   "0.2",
                                   "--lease-timeout",
                                   "5",
                                   "--job-config-json",
                                   job.ToJson()};
  if (checkpoint_dir_flag) {
    argv.push_back("--checkpoint-dir");
    argv.push_back(job.checkpoint_dir);
  }
  CoordinatorProcess c;
  c.process = std::make_unique<ChildProcess>(argv, log);
  c.address = WaitForGrpcAddress(log, absl::Seconds(20), c.process.get());
  std::smatch m;
  const std::string text = ReadFile(log);
  static const std::regex metrics_line(R"(127\.0\.0\.1:([0-9]+) \(metrics\))");
  if (std::regex_search(text, m, metrics_line)) c.metrics_port = std::stoi(m[1].str());
  return c;
}

inline std::unique_ptr<ChildProcess> StartWorker(const std::string& dir, const std::string& address,
                                                 const std::string& name) {
  return std::make_unique<ChildProcess>(
      std::vector<std::string>{BinPath("zeroshard-worker"), "--coordinator", address, "--worker-id",
                               name, "--threads", "1"},
      absl::StrCat(dir, "/", name, ".log"));
}

// `zeroshard status --json` output ("" and a failed test if it fails).
inline std::string StatusJson(const std::string& address) {
  const CommandResult r =
      RunCommand(absl::StrCat(BinPath("zeroshard"), " status --json --coordinator ", address));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.output;
}

// The value of one sample line in /metrics, e.g. `zeroshard_job_state{state="completed"}`;
// "" if absent.
inline std::string MetricValue(int port, const std::string& series) {
  const server::testing::HttpResponse r = server::testing::HttpGet(port, "/metrics");
  const size_t at = r.body.find("\n" + series + " ");
  if (at == std::string::npos) return "";
  const size_t begin = at + series.size() + 2;
  return r.body.substr(begin, r.body.find('\n', begin) - begin);
}

// The coordinator's latest generation number in `zeroshard status --json`
// (JobStatus.generation, printed first of the generation fields); -1 if absent.
inline int64_t GenerationOf(const std::string& status_json) {
  static const std::regex field(R"re("generation": *"?([0-9]+))re");
  std::smatch m;
  return std::regex_search(status_json, m, field) ? std::stoll(m[1].str()) : -1;
}

}  // namespace zeroshard::testing
