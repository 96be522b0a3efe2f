// The worker's lifecycle in one process: an in-process coordinator and
// RunWorker threads, each given its own stop token (worker_runtime.h) where
// the worker binary passes its SIGTERM's. In-process twins of the
// multi-process trainer tests, without child processes or signals, checked
// on the step log's events, not on log text:
// - a stop token (elastic_leave_test's SIGTERM): the worker hands its shard
//   over at the next step boundary and leaves (OK); the others reshard live,
//   train every step once, and complete the job;
// - a worker joining a running job (elastic_live_test's scale-up): the ranks
//   yield, the first survivor reports the handoff (ReportHandoff), and the
//   bigger generation reshards live from the step they stopped at;
// - an operator's StopJob: the ranks agree on a step, end there with the
//   "stopped" event, and every worker exits OK;
// - a worker that vanishes (WorkerOptions::crash, elastic_redundancy_test's
//   kill -9): the others' collectives fail, the coordinator names the lost
//   member, and the survivors go on from their peer copies, with no
//   checkpoint read; without copies or a checkpoint (elastic_leave_test's
//   kill -9 with no checkpoint) they start again from the seeded init;
// - job_lifecycle_test's ends: past max_failures a vanished rank fails the
//   job and the survivors end FAILED_PRECONDITION naming it; workers that
//   come to a completed or failed job end at once and form no generation.
#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/rpc/coordinator_server.h"
#include "tests/trainer/job_processes.h"
#include "worker/trainer/stop_token.h"
#include "worker/trainer/worker_runtime.h"

namespace zeroshard {
namespace {

using testing::ReadStepRecords;
using testing::WaitForStep;
using testing::WithEvent;

constexpr int kWorkers = 3;
constexpr int kLeaver = 2;

std::unique_ptr<CoordinatorServer> StartCoordinator(const JobConfig& job, int min_workers) {
  CoordinatorOptions o;
  o.metrics_listen = "";
  o.core.job_id = "in-process";
  o.core.min_workers = min_workers;
  o.core.max_workers = kWorkers;
  o.core.settle = absl::Milliseconds(300);
  o.core.heartbeat_interval = absl::Milliseconds(100);
  o.core.lease_timeout = absl::Seconds(3);
  o.core.job_config_json = job.ToJson();
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> server = CoordinatorServer::Start(o);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

struct WorkerThread {
  StopSource stop;
  StopSource crash;
  absl::Status result = absl::UnknownError("still running");
  std::thread thread;
};

void StartWorker(WorkerThread& w, const std::string& address, int i) {
  WorkerOptions options;
  options.coordinator = address;
  options.worker_id = absl::StrCat("w", i);
  options.stop = w.stop.token();
  options.crash = w.crash.token();
  w.thread = std::thread([&w, options] { w.result = RunWorker(options); });
}

// kWorkers worker threads on `job` (a generation needs `min_workers`):
// once the step log shows step `at` at kWorkers ranks, worker kLeaver's
// `fault` source (its stop or its crash) is set; then every worker is
// joined. The source picks the worker, whatever its rank. `trained` says
// whether step `at` came (else no fault was set).
struct FaultRun {
  FaultRun() : workers(kWorkers) {}
  std::unique_ptr<CoordinatorServer> server;
  std::vector<WorkerThread> workers;
  bool trained = false;
  uint64_t generation_at_fault = 0;
};

void RunWithFault(FaultRun& run, const JobConfig& job, int min_workers, int64_t at,
                  StopSource WorkerThread::*fault) {
  run.server = StartCoordinator(job, min_workers);
  if (run.server == nullptr) return;
  for (int i = 0; i < kWorkers; ++i) StartWorker(run.workers[i], run.server->address(), i);
  run.trained = WaitForStep(job.log_path, at, kWorkers);
  run.generation_at_fault = run.server->generation();
  if (run.trained) (run.workers[kLeaver].*fault).RequestStop();
  for (WorkerThread& w : run.workers) w.thread.join();
}

// The step log of a job the survivors finished at kWorkers - 1 ranks.
std::vector<StepRecord> FinishedWithOneFewer(const JobConfig& job) {
  std::vector<StepRecord> records = ReadStepRecords(job.log_path);
  EXPECT_FALSE(records.empty());
  if (records.empty()) return records;
  EXPECT_EQ(records.back().step, job.steps);
  EXPECT_EQ(records.back().world_size, kWorkers - 1);
  return records;
}

TEST(WorkerInProcessTest, AStopTokenHandsTheShardOverAndTheOthersFinish) {
  const std::string dir = testing::MakeTempDir("zs_in_process");
  const JobConfig job = testing::SmallJob(dir, 120);  // Steps to spare after the stop.
  FaultRun run;
  RunWithFault(run, job, kWorkers - 1, 6, &WorkerThread::stop);
  ASSERT_TRUE(run.trained) << "no step at world size " << kWorkers;
  for (int i = 0; i < kWorkers; ++i)
    EXPECT_TRUE(run.workers[i].result.ok()) << run.workers[i].result;
  const std::vector<StepRecord> records = FinishedWithOneFewer(job);
  ASSERT_FALSE(records.empty());
  const std::vector<StepRecord> left = WithEvent(records, "left");
  ASSERT_EQ(left.size(), 1u);
  ASSERT_EQ(left[0].leaving.size(), 1u);
  const std::vector<StepRecord> resharded = WithEvent(records, "resharded_live");
  ASSERT_FALSE(resharded.empty()) << "the survivors restored instead of resharding live";
  EXPECT_EQ(resharded.back().start_step, left[0].step);
  EXPECT_EQ(resharded.back().world_size, kWorkers - 1);
  // Every step once: the records' steps strictly increase.
  for (size_t i = 1; i < records.size(); ++i) EXPECT_GT(records[i].step, records[i - 1].step);
  run.server->Shutdown();
}

TEST(WorkerInProcessTest, AJoiningWorkerMakesTheRanksHandOffAndReshardLive) {
  const std::string dir = testing::MakeTempDir("zs_in_process_join");
  // Steps to spare while the joiner loads its data (about a second here).
  const JobConfig job = testing::SmallJob(dir, 500);
  std::unique_ptr<CoordinatorServer> server = StartCoordinator(job, kWorkers - 1);
  ASSERT_NE(server, nullptr);
  std::vector<WorkerThread> workers(kWorkers);
  for (int i = 0; i < kWorkers - 1; ++i) StartWorker(workers[i], server->address(), i);
  const bool trained = WaitForStep(job.log_path, 6, kWorkers - 1);
  StartWorker(workers[kWorkers - 1], server->address(), kWorkers - 1);
  for (WorkerThread& w : workers) w.thread.join();
  ASSERT_TRUE(trained) << "no step at world size " << kWorkers - 1;
  for (int i = 0; i < kWorkers; ++i) EXPECT_TRUE(workers[i].result.ok()) << workers[i].result;
  const std::vector<StepRecord> records = ReadStepRecords(job.log_path);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.back().step, job.steps);
  EXPECT_EQ(records.back().world_size, kWorkers);
  const std::vector<StepRecord> handed = WithEvent(records, "handed_off");
  ASSERT_EQ(handed.size(), 1u);
  const std::vector<StepRecord> resharded = WithEvent(records, "resharded_live");
  ASSERT_EQ(resharded.size(), 1u) << "the bigger generation did not reshard live";
  EXPECT_EQ(resharded[0].start_step, handed[0].step);
  EXPECT_EQ(resharded[0].world_size, kWorkers);
  for (size_t i = 1; i < records.size(); ++i) EXPECT_GT(records[i].step, records[i - 1].step);
  server->Shutdown();
}

TEST(WorkerInProcessTest, AnOperatorsStopEndsTheJobAtOneAgreedStep) {
  const std::string dir = testing::MakeTempDir("zs_in_process_stop");
  const JobConfig job = testing::SmallJob(dir, 100000);  // Ends only by the stop.
  std::unique_ptr<CoordinatorServer> server = StartCoordinator(job, kWorkers);
  ASSERT_NE(server, nullptr);
  std::vector<WorkerThread> workers(kWorkers);
  for (int i = 0; i < kWorkers; ++i) StartWorker(workers[i], server->address(), i);
  const bool trained = WaitForStep(job.log_path, 4, kWorkers);
  v1::StopJobRequest stop;
  const absl::Status stopped = server->core()->StopJob(stop).status();
  for (WorkerThread& w : workers) w.thread.join();
  ASSERT_TRUE(trained) << "no step at world size " << kWorkers;
  ASSERT_TRUE(stopped.ok()) << stopped;
  for (int i = 0; i < kWorkers; ++i) EXPECT_TRUE(workers[i].result.ok()) << workers[i].result;
  const std::vector<StepRecord> records = ReadStepRecords(job.log_path);
  ASSERT_FALSE(records.empty());
  const std::vector<StepRecord> ends = WithEvent(records, "stopped");
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].step, records.back().step) << "the stopped step is the last";
  EXPECT_LT(records.back().step, job.steps);
  server->Shutdown();
}

TEST(WorkerInProcessTest, AVanishedRankIsRecoveredFromItsPeersCopies) {
  const std::string dir = testing::MakeTempDir("zs_in_process_crash");
  JobConfig job = testing::SmallJob(dir, 120);
  job.redundancy = 1;
  job.backend = BackendChoice::kGloo;  // A closed socket is the lost peer here.
  job.collective_timeout_s = 20;
  FaultRun run;
  RunWithFault(run, job, kWorkers - 1, 6, &WorkerThread::crash);
  ASSERT_TRUE(run.trained) << "no step at world size " << kWorkers;
  EXPECT_TRUE(absl::IsAborted(run.workers[kLeaver].result)) << run.workers[kLeaver].result;
  for (int i = 0; i < kWorkers; ++i) {
    if (i != kLeaver) {
      EXPECT_TRUE(run.workers[i].result.ok()) << run.workers[i].result;
    }
  }
  const std::vector<StepRecord> records = FinishedWithOneFewer(job);
  ASSERT_FALSE(records.empty());
  for (const StepRecord& r : records) EXPECT_EQ(r.live_refused, "") << "step " << r.step;
  EXPECT_TRUE(WithEvent(records, "restored_checkpoint").empty());
  const std::vector<StepRecord> resharded = WithEvent(records, "resharded_live");
  ASSERT_FALSE(resharded.empty()) << "the survivors did not go on from their peer copies";
  EXPECT_EQ(resharded.back().world_size, kWorkers - 1);
  auto status = run.server->core()->GetJobStatus({});
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->last_lost().worker_id(), absl::StrCat("w", kLeaver)) << status->DebugString();
  run.server->Shutdown();
}

TEST(WorkerInProcessTest, WithoutCopiesOrACheckpointTheSurvivorsStartAgain) {
  const std::string dir = testing::MakeTempDir("zs_in_process_crash_init");
  JobConfig job = testing::SmallJob(dir, 60);
  job.backend = BackendChoice::kGloo;
  job.collective_timeout_s = 20;
  FaultRun run;
  RunWithFault(run, job, kWorkers - 1, 6, &WorkerThread::crash);
  ASSERT_TRUE(run.trained) << "no step at world size " << kWorkers;
  EXPECT_TRUE(absl::IsAborted(run.workers[kLeaver].result)) << run.workers[kLeaver].result;
  const std::vector<StepRecord> records = FinishedWithOneFewer(job);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(run.server->generation(), run.generation_at_fault + 1)
      << "exactly one generation of two";
  const auto first_of_two = std::find_if(records.begin(), records.end(), [](const StepRecord& r) {
    return r.world_size == kWorkers - 1;
  });
  ASSERT_NE(first_of_two, records.end());
  EXPECT_EQ(first_of_two->step, 1);
  EXPECT_EQ(first_of_two->events, std::vector<std::string>{"initialized"});
  run.server->Shutdown();
}

// Workers that come once the job has ended: OK (completed) or the job's
// failure, at once, and no generation forms for them.
void ExpectLateWorkersEndAtOnce(CoordinatorServer& server, bool failed) {
  const uint64_t generation = server.generation();
  std::vector<WorkerThread> late(2);
  for (int i = 0; i < 2; ++i) StartWorker(late[i], server.address(), 10 + i);
  for (WorkerThread& w : late) w.thread.join();
  for (WorkerThread& w : late) {
    if (failed) {
      EXPECT_TRUE(absl::IsFailedPrecondition(w.result)) << w.result;
    } else {
      EXPECT_TRUE(w.result.ok()) << w.result;
    }
  }
  EXPECT_EQ(server.generation(), generation);
}

TEST(WorkerInProcessTest, ACompletedJobSendsLateWorkersAway) {
  const std::string dir = testing::MakeTempDir("zs_in_process_done");
  const JobConfig job = testing::SmallJob(dir, 8);
  std::unique_ptr<CoordinatorServer> server = StartCoordinator(job, 2);
  ASSERT_NE(server, nullptr);
  std::vector<WorkerThread> workers(2);
  for (int i = 0; i < 2; ++i) StartWorker(workers[i], server->address(), i);
  for (WorkerThread& w : workers) w.thread.join();
  for (WorkerThread& w : workers) ASSERT_TRUE(w.result.ok()) << w.result;
  auto status = server->core()->GetJobStatus({});
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->job_state(), v1::JOB_STATE_COMPLETED);
  ExpectLateWorkersEndAtOnce(*server, /*failed=*/false);
  server->Shutdown();
}

TEST(WorkerInProcessTest, PastMaxFailuresAVanishedRankFailsTheJob) {
  const std::string dir = testing::MakeTempDir("zs_in_process_failed");
  JobConfig job = testing::SmallJob(dir, 100000);  // Ends only by the failure.
  job.max_failures = 0;
  job.backend = BackendChoice::kGloo;
  job.collective_timeout_s = 20;
  FaultRun run;
  RunWithFault(run, job, kWorkers, 4, &WorkerThread::crash);
  ASSERT_TRUE(run.trained) << "no step at world size " << kWorkers;
  for (int i = 0; i < kWorkers; ++i) {
    if (i == kLeaver) continue;
    EXPECT_TRUE(absl::IsFailedPrecondition(run.workers[i].result)) << run.workers[i].result;
    EXPECT_NE(run.workers[i].result.message().find("max_failures 0"), std::string::npos)
        << run.workers[i].result;
  }
  auto status = run.server->core()->GetJobStatus({});
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->job_state(), v1::JOB_STATE_FAILED);
  ExpectLateWorkersEndAtOnce(*run.server, /*failed=*/true);
  run.server->Shutdown();
}

}  // namespace
}  // namespace zeroshard
