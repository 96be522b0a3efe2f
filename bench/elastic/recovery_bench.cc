// Elastic recovery on this machine, with separate coordinator and worker
// processes on loopback and the coordinator's default timeouts (heartbeat
// 1 s, settle 1 s, lease 5 s) unless told otherwise:
// 1. The cost of peer redundancy: the same job at --redundancy 0 and 1;
//    median step time, median refresh time (the step record's
//    redundancy_seconds) as a fraction of it, and the copies' memory next to
//    the optimizer state's.
// 2. A recovery breakdown over --kills kill -9s of one of --workers workers
//    (a replacement joins after each, by live handoff): from the kill to
//    detection (the coordinator logs a failure report or a lost rank), to
//    the next generation (a worker logs it), to the live reshard (a worker
//    logs "resharded live"), to the first step of the new generation (the
//    step log). Median and p99 of each, in seconds. Times are when the
//    bench saw each line (polled every 2 ms).
//
// Usage: recovery_bench [--model small] [--workers 4] [--kills 10]
//        [--heartbeat 1] [--settle 1] [--lease 5]
// Run from the build directory (it starts bin/zeroshard-coordinator and
// bin/zeroshard-worker).
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/model/job_config.h"
#include "tests/support/subprocess.h"
#include "worker/data/text_corpus.h"
#include "worker/trainer/step_record.h"

namespace zeroshard {
namespace {

using testing::BinPath;
using testing::ReadFile;

struct Options {
  std::string model = "small";
  int workers = 4, kills = 10, steps_cost = 40;
  double heartbeat = 1, settle = 1, lease = 5;
};

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

std::vector<StepRecord> Records(const std::string& path) {
  std::vector<StepRecord> out;
  std::istringstream in(ReadFile(path));
  for (std::string line; std::getline(in, line);) {
    if (auto r = StepRecord::FromJsonLine(line); r.ok()) out.push_back(*r);
  }
  return out;
}

struct Job {
  Options opts;
  std::string dir;
  JobConfig config;
  std::unique_ptr<ChildProcess> coordinator;
  std::string address;
  std::vector<std::unique_ptr<ChildProcess>> workers;

  bool Start(const std::string& name, int redundancy, int64_t steps) {
    dir = testing::MakeTempDir(name);
    config.model = opts.model;
    config.stage = 3;
    config.steps = steps;
    config.global_batch = 12;
    config.micro_batch = 3;
    config.data = DefaultDataPaths();
    config.eval_every = 0;
    config.redundancy = redundancy;
    config.log_path = dir + "/steps.jsonl";
    coordinator = std::make_unique<ChildProcess>(
        std::vector<std::string>{
            BinPath("zeroshard-coordinator"), "--listen", "127.0.0.1:0", "--metrics-listen", "",
            "--min-workers", std::to_string(opts.workers - 1), "--max-workers",
            std::to_string(opts.workers), "--settle", absl::StrCat(opts.settle),
            "--heartbeat-interval", absl::StrCat(opts.heartbeat), "--lease-timeout",
            absl::StrCat(opts.lease), "--job-config-json", config.ToJson()},
        dir + "/coordinator.log");
    address = testing::WaitForGrpcAddress(dir + "/coordinator.log", absl::Seconds(20));
    for (int i = 0; i < opts.workers; ++i) AddWorker();
    return !address.empty();
  }
  void AddWorker() {
    const size_t k = workers.size();
    workers.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{BinPath("zeroshard-worker"), "--coordinator", address,
                                 "--worker-id", absl::StrCat("w", k), "--threads", "1"},
        absl::StrCat(dir, "/worker-", k, ".log")));
  }
  std::string WorkerLogs() const {
    std::string all;
    for (size_t k = 0; k < workers.size(); ++k) {
      all += ReadFile(absl::StrCat(dir, "/worker-", k, ".log"));
    }
    return all;
  }
  void Stop() {
    for (auto& w : workers) w->Signal(SIGKILL);
    coordinator->Signal(SIGTERM);
    coordinator->Wait(absl::Seconds(10));
  }
};

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Polls until `done` or 120 s; the time it took from `since`.
template <typename Done>
double Until(absl::Time since, Done done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  while (!done() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(2));
  return absl::ToDoubleSeconds(absl::Now() - since);
}

void RedundancyCost(const Options& opts) {
  double step[2] = {}, refresh[2] = {};
  int64_t optimizer = 0, copies = 0;
  for (int redundancy : {0, 1}) {
    Job job;
    job.opts = opts;
    if (!job.Start("zs_bench_cost", redundancy, opts.steps_cost)) return;
    for (auto& w : job.workers) w->Wait(absl::Seconds(600));
    job.Stop();
    std::vector<double> s, r;
    const auto records = Records(job.config.log_path);
    for (size_t i = 5; i < records.size(); ++i) {
      s.push_back(records[i].step_seconds);
      r.push_back(records[i].redundancy_seconds);
    }
    step[redundancy] = Quantile(s, 0.5);
    refresh[redundancy] = Quantile(r, 0.5);
    if (redundancy == 1 && !records.empty()) {
      optimizer = records.back().ranks[0].memory.optimizer;
      copies = records.back().ranks[0].peak_memory.redundancy;
    }
  }
  std::printf("redundancy cost (%s, %d workers, stage 3):\n", opts.model.c_str(), opts.workers);
  std::printf("  step time median: %.4f s without, %.4f s with redundancy\n", step[0], step[1]);
  std::printf("  refresh median: %.4f s = %.3f of the step time\n", refresh[1],
              step[1] > 0 ? refresh[1] / step[1] : 0.0);
  std::printf("  rank 0 memory: optimizer %lld bytes, redundancy copies %lld bytes (%.2fx)\n",
              static_cast<long long>(optimizer), static_cast<long long>(copies),
              optimizer > 0 ? static_cast<double>(copies) / static_cast<double>(optimizer) : 0);
}

void RecoveryBreakdown(const Options& opts) {
  Job job;
  job.opts = opts;
  if (!job.Start("zs_bench_recovery", 1, 1000000)) return;
  const std::string coord_log = job.dir + "/coordinator.log";
  Until(absl::Now(), [&] { return Records(job.config.log_path).size() >= 5; });
  std::vector<double> phase[4];
  std::vector<size_t> alive;
  for (int k = 0; k < opts.workers; ++k) alive.push_back(static_cast<size_t>(k));
  for (int kill = 0; kill < opts.kills; ++kill) {
    const auto before = Records(job.config.log_path);
    const uint64_t gen = before.empty() ? 0 : before.back().generation;
    const size_t reports =
        Count(ReadFile(coord_log), "reports a failure") + Count(ReadFile(coord_log), "lost rank");
    const size_t gens = Count(job.WorkerLogs(), ": rank ");  // "generation G: rank R of N"
    const size_t reshards = Count(job.WorkerLogs(), "resharded live");
    const size_t pick = static_cast<size_t>(kill * 3) % alive.size();
    const absl::Time t = absl::Now();
    job.workers[alive[pick]]->Signal(SIGKILL);
    alive.erase(alive.begin() + static_cast<long>(pick));
    phase[0].push_back(Until(t, [&] {
      const std::string log = ReadFile(coord_log);
      return Count(log, "reports a failure") + Count(log, "lost rank") > reports;
    }));
    phase[1].push_back(Until(t, [&] { return Count(job.WorkerLogs(), ": rank ") > gens; }));
    phase[2].push_back(
        Until(t, [&] { return Count(job.WorkerLogs(), "resharded live") > reshards; }));
    phase[3].push_back(Until(t, [&] {
      const auto r = Records(job.config.log_path);
      return !r.empty() && r.back().generation > gen;
    }));
    std::printf(
        "kill %d: detected %.2f s, new generation %.2f s, resharded %.2f s, "
        "first step %.2f s\n",
        kill, phase[0].back(), phase[1].back(), phase[2].back(), phase[3].back());
    job.AddWorker();  // Back to full size by live handoff before the next kill.
    alive.push_back(job.workers.size() - 1);
    const uint64_t next = gen;
    Until(absl::Now(), [&] {
      const auto r = Records(job.config.log_path);
      return !r.empty() && r.back().world_size == opts.workers && r.back().generation > next + 1;
    });
  }
  job.Stop();
  const char* names[4] = {"detection", "new generation", "reshard (heal)", "first step"};
  std::printf(
      "recovery after kill -9, seconds from the kill (%d kills, heartbeat %.2g s, "
      "settle %.2g s, lease %.2g s):\n",
      opts.kills, opts.heartbeat, opts.settle, opts.lease);
  for (int p = 0; p < 4; ++p) {
    std::printf("  %-16s median %.2f  p99 %.2f\n", names[p], Quantile(phase[p], 0.5),
                Quantile(phase[p], 0.99));
  }
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  zeroshard::Options o;
  CLI::App app{"elastic recovery benchmark"};
  app.add_option("--model", o.model)->capture_default_str();
  app.add_option("--workers", o.workers)->check(CLI::Range(2, 16))->capture_default_str();
  app.add_option("--kills", o.kills)->check(CLI::Range(1, 100))->capture_default_str();
  app.add_option("--cost-steps", o.steps_cost)
      ->check(CLI::Range(10, 100000))
      ->capture_default_str();
  app.add_option("--heartbeat", o.heartbeat)->capture_default_str();
  app.add_option("--settle", o.settle)->capture_default_str();
  app.add_option("--lease", o.lease)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (getenv("ZEROSHARD_BIN_DIR") == nullptr) setenv("ZEROSHARD_BIN_DIR", "bin", 0);
  zeroshard::RedundancyCost(o);
  zeroshard::RecoveryBreakdown(o);
  return 0;
}
