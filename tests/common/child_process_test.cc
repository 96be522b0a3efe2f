// ChildProcess and ReapBy (common/infra/child_process.h): exit codes and
// signals come back, a child still running at the deadline is -1 / false,
// and a wait ends when the child does, not on a polling tick.
#include "common/infra/child_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

std::string LogPath() { return ::testing::TempDir() + "/child_process_test.log"; }

TEST(ChildProcessTest, WaitReturnsTheExitCode) {
  ChildProcess child({"/bin/sh", "-c", "exit 3"}, LogPath());
  ASSERT_GT(child.pid(), 0);
  EXPECT_EQ(child.Wait(absl::Seconds(20)), 3);
  EXPECT_FALSE(child.Running());
}

TEST(ChildProcessTest, StillRunningAtTheDeadlineThenStopped) {
  ChildProcess child({"/bin/sleep", "30"}, LogPath());
  const absl::Time start = absl::Now();
  EXPECT_EQ(child.Wait(absl::Milliseconds(100)), -1);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(100));
  EXPECT_TRUE(child.Running());
  EXPECT_EQ(child.Stop(absl::Seconds(10)), 128 + SIGTERM);
}

TEST(ReapByTest, ReturnsOnceTheChildIsKilled) {
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    pause();
    _exit(0);
  }
  int status = 0;
  EXPECT_FALSE(ReapBy(pid, absl::Now() + absl::Milliseconds(50), &status));
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  ASSERT_TRUE(ReapBy(pid, absl::Now() + absl::Seconds(20), &status));
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
}

// AwaitExit takes any process: init runs on; a killed child has ended
// (a zombie until reaped), and so has a pid that names no process.
TEST(AwaitExitTest, EndedOrStillRunningAtTheDeadline) {
  EXPECT_EQ(AwaitExit(1, absl::Now() + absl::Milliseconds(50)), std::optional<bool>(false));
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    pause();
    _exit(0);
  }
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  EXPECT_EQ(AwaitExit(pid, absl::Now() + absl::Seconds(20)), std::optional<bool>(true));
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_EQ(AwaitExit(pid, absl::Now() + absl::Seconds(20)), std::optional<bool>(true));
}

TEST(ReapByTest, NoChildOfThisProcessIsFalseAtOnce) {
  int status = 0;
  const absl::Time start = absl::Now();
  EXPECT_FALSE(ReapBy(1, absl::Now() + absl::Seconds(20), &status));  // init: not ours.
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

}  // namespace
}  // namespace zeroshard
