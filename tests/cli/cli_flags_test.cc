// Every binary answers --help and --version with exit 0, and an unknown flag
// or a bad value with exit 2 and one line naming the flag; a busy port is
// one line too; commands default their coordinator.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "gtest/gtest.h"
#include "tests/support/subprocess.h"

namespace {

using zeroshard::testing::BinPath;
using zeroshard::testing::CommandResult;

CommandResult RunBin(const std::string& args) {
  return zeroshard::testing::RunCommand(BinPath("") + args);
}

class BinaryFlagsTest : public ::testing::TestWithParam<const char*> {};

TEST_P(BinaryFlagsTest, HelpAndVersionExitZero) {
  CommandResult help = RunBin(std::string(GetParam()) + " --help");
  EXPECT_EQ(help.exit_code, 0) << help.output;
  EXPECT_NE(help.output.find("--version"), std::string::npos);
  CommandResult version = RunBin(std::string(GetParam()) + " --version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.output.find("0."), std::string::npos) << version.output;
}

TEST_P(BinaryFlagsTest, UnknownFlagExitsTwoNamingIt) {
  CommandResult r = RunBin(std::string(GetParam()) + " --no-such-flag");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no-such-flag"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

INSTANTIATE_TEST_SUITE_P(AllBinaries, BinaryFlagsTest,
                         ::testing::Values("zeroshard", "zeroshard-coordinator",
                                           "zeroshard-worker"));

TEST(CliTest, SubcommandsHaveHelp) {
  for (const char* sub : {"launch", "status", "checkpoint"}) {
    CommandResult r = RunBin(std::string("zeroshard ") + sub + " --help");
    EXPECT_EQ(r.exit_code, 0) << sub << ": " << r.output;
  }
}

// `checkpoint now|list` and `status` need no --coordinator: they take
// $ZEROSHARD_COORDINATOR, else 127.0.0.1:50051, and say which one they
// could not reach.
TEST(CliTest, CoordinatorDefaultsToTheEnvironmentThenTheDefaultAddress) {
  for (const char* sub :
       {"checkpoint list --timeout 1", "checkpoint now --timeout 1", "status --timeout 1"}) {
    CommandResult r = zeroshard::testing::RunCommand(
        std::string("env ZEROSHARD_COORDINATOR=127.0.0.1:9 ") + BinPath("") + "zeroshard " + sub);
    EXPECT_EQ(r.exit_code, 1) << sub << ": " << r.output;
    EXPECT_NE(r.output.find("127.0.0.1:9"), std::string::npos) << sub << ": " << r.output;
    EXPECT_EQ(r.output.find("required"), std::string::npos) << sub << ": " << r.output;
  }
  CommandResult help = RunBin("zeroshard checkpoint list --help");
  EXPECT_NE(help.output.find("127.0.0.1:50051"), std::string::npos) << help.output;
  EXPECT_NE(help.output.find("ZEROSHARD_COORDINATOR"), std::string::npos) << help.output;
}

// A busy port: one line naming the flag and the address, exit 1, before
// gRPC or civetweb print anything of their own.
TEST(CliTest, BusyPortIsOneLineNamingTheFlag) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string busy = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  for (const std::string flag : {"--listen", "--metrics-listen"}) {
    const std::string other = flag == "--listen" ? " --metrics-listen ''" : " --listen 127.0.0.1:0";
    CommandResult r = RunBin("zeroshard-coordinator --state-dir '' " + flag + " " + busy + other);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(flag + " " + busy + ": address already in use"), std::string::npos)
        << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
  close(fd);
}

}  // namespace
