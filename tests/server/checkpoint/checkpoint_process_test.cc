// Multi-process checkpoint tests over loopback (port 0): an uploading worker
// process killed with SIGKILL midway leaves the previous checkpoint as the
// latest and nothing partial listed; the `zeroshard checkpoint` CLI lists,
// triggers and exports against a live service.
#include <signal.h>

#include <filesystem>
#include <fstream>

#include "common/formats/safetensors.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_service.h"
#include "tests/server/checkpoint/checkpoint_test_util.h"
#include "tests/support/file_watch.h"
#include "tests/support/subprocess.h"
#include "worker/checkpoint/checkpoint_client.h"

namespace zeroshard::testing {
namespace {

class ProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("ckpt_process");
    store_ = *server::CheckpointStore::Open({dir_, 0, nullptr, nullptr});
    service_ = std::make_unique<server::CheckpointServiceImpl>(store_.get());
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(service_.get());
    server_ = b.BuildAndStart();
    ASSERT_GT(port_, 0);
    addr_ = "127.0.0.1:" + std::to_string(port_);
  }
  void TearDown() override {
    server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  }

  // Runs the upload tool for one rank to completion; returns its exit code.
  int UploadRank(int64_t step, int rank, uint32_t seed) {
    ChildProcess p({BinPath("checkpoint_upload_tool"), addr_, std::to_string(step),
                    std::to_string(rank), "2", std::to_string(seed), "0"},
                   dir_ + "/upload.log");
    return p.Wait(absl::Seconds(30));
  }
  std::string dir_;
  std::unique_ptr<server::CheckpointStore> store_;
  std::unique_ptr<server::CheckpointServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string addr_;
};

TEST_F(ProcessTest, WorkerKilledMidUploadLeavesPreviousAsLatest) {
  // Step 3: both ranks upload from their own processes and commit.
  ASSERT_EQ(UploadRank(3, 0, 7), 0);
  ASSERT_EQ(UploadRank(3, 1, 7), 0);
  auto done = store_->Commit("step-00000003", 0);
  ASSERT_TRUE(done.ok() && done->committed()) << done.status();

  // Step 4: rank 1 finishes; rank 0 is killed midway.
  ASSERT_EQ(UploadRank(4, 1, 8), 0);
  const std::string log = dir_ + "/slow.log";
  ChildProcess slow({BinPath("checkpoint_upload_tool"), addr_, "4", "0", "2", "8", "20"}, log);
  // The tool prints "sent N" after each chunk (its own protocol, not a log).
  ASSERT_TRUE(testing::WaitForFiles(
      dir_, [&] { return ReadFile(log).find("sent 10\n") != std::string::npos; },
      absl::Seconds(20)))
      << ReadFile(log);
  slow.Signal(SIGKILL);
  EXPECT_EQ(slow.Wait(absl::Seconds(10)), 128 + SIGKILL);
  EXPECT_EQ(ReadFile(log).find("finished"), std::string::npos);

  // Rank 1's commit (made by its process before rank 0 was killed) found
  // rank 0 missing; the cut-off save stays pending and invisible.
  EXPECT_NE(ReadFile(dir_ + "/upload.log").find("committed=0"), std::string::npos);
  EXPECT_EQ(store_->PendingCount(), 1);

  auto client = *checkpoint::CheckpointClient::Connect(addr_);
  auto list = client->List("", absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->checkpoints_size(), 1);
  EXPECT_EQ(list->checkpoints(0).step(), 3);
  auto info = client->GetInfo("", std::nullopt, absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->summary().step(), 3);
  // Step 3's data is intact: equals the seeded reference.
  const ModelState ref = RandomState(OddUnits(), 7);
  std::vector<float> got(static_cast<size_t>(ref.at("embed")[0].size()));
  ASSERT_TRUE(client
                  ->Download("", 3, "embed", v1::TENSOR_KIND_MASTER,
                             {0, static_cast<int64_t>(got.size())}, got.data(),
                             absl::Now() + absl::Seconds(10))
                  .ok());
  EXPECT_EQ(got, ref.at("embed")[0]);
}

TEST_F(ProcessTest, CliListsTriggersAndExports) {
  ASSERT_EQ(UploadRank(5, 0, 9), 0);
  ASSERT_EQ(UploadRank(5, 1, 9), 0);
  ASSERT_TRUE(store_->Commit("step-00000005", 1)->committed());
  const std::string zs = BinPath("zeroshard");
  CommandResult list = RunCommand(zs + " checkpoint list --coordinator " + addr_);
  ASSERT_EQ(list.exit_code, 0) << list.output;
  EXPECT_NE(list.output.find("step-00000005"), std::string::npos) << list.output;
  CommandResult now = RunCommand(zs + " checkpoint now --coordinator " + addr_);
  ASSERT_EQ(now.exit_code, 0) << now.output;
  auto client = *checkpoint::CheckpointClient::Connect(addr_);
  EXPECT_EQ(*client->GetCheckpointTrigger(absl::Now() + absl::Seconds(5)), 1);
  const std::string out = dir_ + "/model.safetensors";
  CommandResult exp = RunCommand(zs + " checkpoint export --checkpoint " + dir_ + " --out " + out);
  ASSERT_EQ(exp.exit_code, 0) << exp.output;
  auto info = ReadSafetensorsInfo(out);
  ASSERT_TRUE(info.ok()) << info.status();
  const ModelState ref9 = RandomState(OddUnits(), 9);
  const std::vector<float>& embed = ref9.at("embed")[0];
  const std::vector<float> wpe(embed.begin() + 37 * 8, embed.end());  // wte is 37 x 8.
  EXPECT_EQ(*ReadSafetensorsF32(out, *info, "wpe"), wpe);
  CommandResult bad =
      RunCommand(zs + " checkpoint export --checkpoint " + dir_ + "/none --out " + out);
  EXPECT_EQ(bad.exit_code, 1);
  // A usage error is exit 2 (no --coordinator is not one: it defaults, see
  // cli_flags_test).
  CommandResult usage = RunCommand(zs + " checkpoint list --no-such-flag");
  EXPECT_EQ(usage.exit_code, 2) << usage.output;
}

// The real coordinator binary with --checkpoint-dir serves the checkpoint
// service on its port; committed checkpoints survive its restart. The
// uploads come from one process per rank, so no generation holds both
// ranks: they write with an admin token, which acts for any rank (a
// worker's writes are bound to its rank, security_least_privilege_test).
TEST(CoordinatorBinaryTest, ServesCheckpointsAndKeepsThemAcrossRestart) {
  const std::string dir = MakeTempDir("ckpt_coord_bin");
  const std::string zs = BinPath("zeroshard");
  const std::string tokens = dir + "/tokens";
  {
    std::ofstream(tokens) << "admin ckpt-process-admin-token-0123\n";
    std::filesystem::permissions(
        tokens, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  }
  ::setenv("ZEROSHARD_TOKEN_FILE", tokens.c_str(), 1);  // The children inherit it.
  for (int life = 0; life < 2; ++life) {
    const std::string log = dir + "/coordinator" + std::to_string(life) + ".log";
    // Job "job", whose model checkpoint_upload_tool joins with (its plan
    // has alignment 4).
    ChildProcess coord(
        {BinPath("zeroshard-coordinator"), "--listen", "127.0.0.1:0", "--metrics-listen", "",
         "--job-id", "job", "--alignment", "4", "--checkpoint-dir", dir + "/ckpt",
         "--keep-checkpoints", "3", "--token-file", tokens},
        log);
    const std::string addr = WaitForGrpcAddress(log, absl::Seconds(20));
    ASSERT_FALSE(addr.empty()) << ReadFile(log);
    if (life == 0) {
      for (int r = 0; r < 2; ++r) {
        ChildProcess up(
            {BinPath("checkpoint_upload_tool"), addr, "2", std::to_string(r), "2", "4", "0"},
            dir + "/up.log");
        ASSERT_EQ(up.Wait(absl::Seconds(30)), 0) << ReadFile(dir + "/up.log");
      }
      EXPECT_NE(ReadFile(dir + "/up.log").find("committed=1"), std::string::npos)
          << ReadFile(dir + "/up.log");
    }
    CommandResult list = RunCommand(zs + " checkpoint list --coordinator " + addr);
    ASSERT_EQ(list.exit_code, 0) << list.output;
    EXPECT_NE(list.output.find("step-00000002"), std::string::npos) << "life " << life << "\n"
                                                                    << list.output;
    coord.Signal(SIGTERM);
    EXPECT_EQ(coord.Wait(absl::Seconds(10)), 0);
  }
  ::unsetenv("ZEROSHARD_TOKEN_FILE");
}

}  // namespace
}  // namespace zeroshard::testing
