// WaitForFiles (file_watch.h): it returns on the file events of a
// directory, also one that does not exist when the wait starts, and gives
// up after its timeout.
#include "tests/support/file_watch.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace zeroshard::testing {
namespace {

std::string FreshDir() {
  char tmpl[] = "/tmp/zs_file_watch.XXXXXX";
  const char* dir = mkdtemp(tmpl);
  EXPECT_NE(dir, nullptr);
  return dir;
}

bool Exists(const std::string& path) { return std::filesystem::exists(path); }

TEST(FileWatchTest, AConditionThatHoldsReturnsAtOnce) {
  const std::string dir = FreshDir();
  EXPECT_TRUE(WaitForFiles(
      dir, [] { return true; }, absl::Seconds(5)));
  std::filesystem::remove_all(dir);
}

TEST(FileWatchTest, AFileWrittenInTheDirectoryWakesTheWait) {
  const std::string dir = FreshDir();
  std::thread writer([&] { std::ofstream(dir + "/done") << "1"; });
  EXPECT_TRUE(WaitForFiles(
      dir, [&] { return Exists(dir + "/done"); }, absl::Seconds(20)));
  writer.join();
  std::filesystem::remove_all(dir);
}

// The directory two levels down is created after the wait starts (or
// while it arms): the wait follows it down on its ancestors' events, with
// no fallback to polling.
TEST(FileWatchTest, ADirectoryCreatedLaterIsFollowed) {
  const std::string dir = FreshDir();
  const std::string deep = dir + "/run/steps";
  ::testing::internal::CaptureStderr();
  std::thread writer([&] {
    std::filesystem::create_directories(deep);
    std::ofstream(deep + "/log") << "1";
  });
  const bool seen = WaitForFiles(
      deep, [&] { return Exists(deep + "/log"); }, absl::Seconds(20));
  writer.join();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(seen);
  EXPECT_EQ(err, "") << "fell back to polling";
  std::filesystem::remove_all(dir);
}

TEST(FileWatchTest, GivesUpAfterItsTimeout) {
  const std::string dir = FreshDir();
  const absl::Time start = absl::Now();
  EXPECT_FALSE(WaitForFiles(
      dir + "/never", [] { return false; }, absl::Milliseconds(200)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace zeroshard::testing
