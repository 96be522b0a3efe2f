// The real zeroshard-coordinator binary as a child process on loopback:
// port 0 read back from its output, kill -9 and restart on the same state
// dir (generation strictly above the old one, last step intact, workers
// rejoin), SIGTERM exits cleanly, bad flags exit 2, and `zeroshard status`
// prints the job or fails with one line when unreachable; its
// zeroshard_build_info names the malloc the build linked it with.
#include <signal.h>

#include <fstream>
#include <regex>

#include "common/rpc/coordinator_client.h"
#include "gtest/gtest.h"
#include "tests/server/await_generation_rpc.h"
#include "tests/server/http_get.h"
#include "tests/support/subprocess.h"

namespace zeroshard {
namespace {

using zeroshard::testing::BinPath;
using zeroshard::testing::ChildProcess;
using zeroshard::testing::MakeTempDir;
using zeroshard::testing::ReadFile;
using zeroshard::testing::RunCommand;
using zeroshard::testing::WaitForGrpcAddress;

// A coordinator child process and its bound gRPC address.
struct Coordinator {
  std::unique_ptr<ChildProcess> process;
  std::string address;
  std::string log;
};

Coordinator StartCoordinator(const std::string& state_dir, const std::string& log) {
  Coordinator c;
  c.log = log;
  std::ofstream(log, std::ios::trunc).flush();
  c.process = std::make_unique<ChildProcess>(
      std::vector<std::string>{BinPath("zeroshard-coordinator"), "--listen", "127.0.0.1:0",
                               "--metrics-listen", "127.0.0.1:0", "--state-dir", state_dir,
                               "--job-id", "proc", "--min-workers", "2", "--settle", "0.1",
                               "--heartbeat-interval", "0.5", "--lease-timeout", "10",
                               "--job-config-json", R"({"model":"tiny","stage":3})"},
      log);
  c.address = WaitForGrpcAddress(log, absl::Seconds(15), c.process.get());
  return c;
}

uint64_t JoinWorker(CoordinatorClient& client, const std::string& worker) {
  v1::JoinRequest j;
  j.set_job_id("proc");
  j.set_worker_id(worker);
  j.set_host("127.0.0.1");
  auto r = client.Join(j);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->member_id() : 0;
}

// The generation the members are in once one runs with all of them (0 on
// timeout), seen on the WatchGeneration stream; a heartbeat of each
// member confirms it.
uint64_t WaitRunning(CoordinatorClient& client, const std::vector<uint64_t>& members) {
  const uint64_t generation = server::testing::AwaitRunningGeneration(
      client, "proc", absl::Seconds(10), static_cast<int>(members.size()));
  for (uint64_t m : members) {
    v1::HeartbeatRequest h;
    h.set_job_id("proc");
    h.set_member_id(m);
    auto r = client.Heartbeat(h);
    if (!r.ok() || !r->in_generation() || r->generation() != generation) return 0;
  }
  return generation;
}

// Every member reports step 42 with loss 1.75 for `generation`; member i is rank i.
::testing::AssertionResult ReportStep42(CoordinatorClient& client,
                                        const std::vector<uint64_t>& members, uint64_t generation) {
  for (int rank = 0; rank < static_cast<int>(members.size()); ++rank) {
    v1::StepReport r;
    r.set_job_id("proc");
    r.set_member_id(members[rank]);
    r.set_generation(generation);
    r.set_rank(rank);
    r.set_step(42);
    r.set_loss(1.75);
    if (absl::Status s = client.ReportStep(r); !s.ok()) {
      return ::testing::AssertionFailure() << "rank " << rank << ": " << s;
    }
  }
  return ::testing::AssertionSuccess();
}

// `zeroshard status` (text and --json) against the live coordinator shows
// `generation`, step 42 and worker w1.
void ExpectStatusShowsJob(const std::string& address, uint64_t generation) {
  auto status = RunCommand(BinPath("zeroshard") + " status --coordinator " + address);
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_NE(status.output.find("generation " + std::to_string(generation)), std::string::npos)
      << status.output;
  EXPECT_NE(status.output.find("step 42  loss 1.7500"), std::string::npos) << status.output;
  EXPECT_NE(status.output.find("w1"), std::string::npos) << status.output;
  auto json = RunCommand(BinPath("zeroshard") + " status --json --coordinator " + address);
  EXPECT_EQ(json.exit_code, 0);
  EXPECT_NE(json.output.find("\"step\": 42,"), std::string::npos) << json.output;
}

// `zeroshard status` against a stopped coordinator fails in one line.
void ExpectStatusUnreachable(const std::string& address) {
  auto unreachable =
      RunCommand(BinPath("zeroshard") + " status --timeout 2 --coordinator " + address);
  EXPECT_EQ(unreachable.exit_code, 1);
  EXPECT_NE(unreachable.output.find("zeroshard status: coordinator"), std::string::npos)
      << unreachable.output;
}

// The job config the coordinator hands `member` in GetGeneration.
std::string JobConfigOf(CoordinatorClient& client, uint64_t member) {
  v1::GetGenerationRequest g;
  g.set_job_id("proc");
  g.set_member_id(member);
  return client.GetGeneration(g)->job_config_json();
}

TEST(CoordinatorProcessTest, KillNineAndRestartKeepsGenerationAndStep) {
  const std::string dir = MakeTempDir("coord-proc");
  Coordinator first = StartCoordinator(dir + "/state", dir + "/first.log");
  ASSERT_FALSE(first.address.empty()) << ReadFile(first.log);
  auto client = *CoordinatorClient::Connect(first.address);
  std::vector<uint64_t> members = {JoinWorker(*client, "w0"), JoinWorker(*client, "w1")};
  const uint64_t old_generation = WaitRunning(*client, members);
  ASSERT_GT(old_generation, 0u);
  EXPECT_EQ(JobConfigOf(*client, members[0]), R"({"model":"tiny","stage":3})");
  ASSERT_TRUE(ReportStep42(*client, members, old_generation));
  ExpectStatusShowsJob(first.address, old_generation);

  first.process->Signal(SIGKILL);
  EXPECT_EQ(first.process->Wait(absl::Seconds(5)), 128 + SIGKILL);

  Coordinator second = StartCoordinator(dir + "/state", dir + "/second.log");
  ASSERT_FALSE(second.address.empty()) << ReadFile(second.log);
  client = *CoordinatorClient::Connect(second.address);
  auto job = client->GetJobStatus({});
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_GT(job->generation(), old_generation);
  EXPECT_EQ(job->step(), 42);
  EXPECT_EQ(job->loss(), 1.75);

  // Old members are unknown: workers rejoin without operator action.
  v1::HeartbeatRequest h;
  h.set_job_id("proc");
  h.set_member_id(members[0]);
  const absl::Status old_beat = client->Heartbeat(h).status();
  EXPECT_TRUE(absl::IsNotFound(old_beat)) << old_beat;
  std::vector<uint64_t> rejoined = {JoinWorker(*client, "w0"), JoinWorker(*client, "w1")};
  EXPECT_NE(rejoined[0], members[0]);
  EXPECT_NE(rejoined[1], members[1]);
  const uint64_t new_generation = WaitRunning(*client, rejoined);
  EXPECT_GT(new_generation, old_generation);
  EXPECT_EQ(JobConfigOf(*client, rejoined[0]), R"({"model":"tiny","stage":3})");

  second.process->Signal(SIGTERM);
  EXPECT_EQ(second.process->Wait(absl::Seconds(10)), 0) << ReadFile(second.log);
  ExpectStatusUnreachable(second.address);
}

// ZEROSHARD_COORDINATOR_MALLOC: cmake/Allocator.cmake's choice for this build.
TEST(CoordinatorProcessTest, BuildInfoNamesTheLinkedMalloc) {
  const std::string dir = MakeTempDir("coord-malloc");
  Coordinator c = StartCoordinator(dir + "/state", dir + "/coordinator.log");
  ASSERT_FALSE(c.address.empty()) << ReadFile(c.log);
  std::smatch port;
  const std::string log = ReadFile(c.log);
  ASSERT_TRUE(std::regex_search(log, port, std::regex(R"(127\.0\.0\.1:([0-9]+) \(metrics\))")))
      << log;
  const std::string text = server::testing::HttpGet(std::stoi(port[1].str()), "/metrics").body;
  EXPECT_NE(text.find(std::string("zeroshard_build_info{allocator=\"") +
                      ZEROSHARD_COORDINATOR_MALLOC + "\""),
            std::string::npos)
      << text;
  c.process->Signal(SIGTERM);
  EXPECT_EQ(c.process->Wait(absl::Seconds(10)), 0) << ReadFile(c.log);
}

TEST(CoordinatorProcessTest, BadFlagsExitTwo) {
  const std::string bin = BinPath("zeroshard-coordinator");
  EXPECT_EQ(RunCommand(bin + " --no-such-flag").exit_code, 2);
  EXPECT_EQ(RunCommand(bin + " --min-workers -3").exit_code, 2);
  EXPECT_EQ(RunCommand(bin + " --settle abc").exit_code, 2);
  EXPECT_EQ(RunCommand(bin + " --job-config /no/such/file.json").exit_code, 2);
  const std::string config = MakeTempDir("cfg") + "/job.json";
  std::ofstream(config) << R"({"a":1})";
  EXPECT_EQ(RunCommand(bin + " --job-config " + config + " --job-config-json '{}'").exit_code, 2);
  EXPECT_EQ(RunCommand(bin + " --listen 127.0.0.1:0 --metrics-listen '' --job-config-json "
                             "'{broken' --state-dir ''")
                .exit_code,
            2);
  // A job config the workers would refuse fails at the coordinator, naming the field.
  const auto typo = RunCommand(bin +
                               " --listen 127.0.0.1:0 --metrics-listen '' --job-config-json "
                               "'{\"stpes\": 40}' --state-dir ''");
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.output.find("stpes"), std::string::npos) << typo.output;
  // So does a model no worker knows, naming the known ones.
  const auto model = RunCommand(bin +
                                " --listen 127.0.0.1:0 --metrics-listen '' --job-config-json "
                                "'{\"model\": \"gpt9\"}' --state-dir ''");
  EXPECT_EQ(model.exit_code, 2);
  EXPECT_NE(model.output.find("unknown model 'gpt9' (known: tiny"), std::string::npos)
      << model.output;
  // checkpoint_every with the coordinator's --checkpoint-dir is served.
  const std::string ckpt = testing::MakeTempDir("zs_ckpt_every");
  ChildProcess served({bin, "--listen", "127.0.0.1:0", "--metrics-listen", "", "--state-dir", "",
                       "--checkpoint-dir", ckpt, "--job-config-json", "{\"checkpoint_every\": 5}"},
                      ckpt + "/coordinator.log");
  EXPECT_FALSE(testing::WaitForGrpcAddress(ckpt + "/coordinator.log", absl::Seconds(20)).empty())
      << testing::ReadFile(ckpt + "/coordinator.log");
  served.Signal(SIGTERM);
  EXPECT_EQ(served.Wait(absl::Seconds(10)), 0);
  EXPECT_EQ(RunCommand(bin + " --min-workers 4 --max-workers 2 --listen 127.0.0.1:0 "
                             "--metrics-listen ''")
                .exit_code,
            2);
}

}  // namespace
}  // namespace zeroshard
