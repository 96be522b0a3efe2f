// Gloo over loopback and shm through shared memory, with ranks as separate
// processes (comm_multiprocess_rank) meeting through a FileStore directory;
// each process checks its results.
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"

namespace zeroshard::testing {
namespace {

// Starts one process per mode (rank = index) and returns their exit codes.
std::vector<int> RunRanks(const std::vector<std::string>& modes, const std::string& dir,
                          const std::string& backend = "gloo") {
  std::vector<std::unique_ptr<ChildProcess>> children;
  const int n = static_cast<int>(modes.size());
  for (int r = 0; r < n; ++r) {
    children.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{BinPath("comm_multiprocess_rank"), dir, absl::StrCat(r),
                                 absl::StrCat(n), modes[r], backend},
        absl::StrCat(dir, "/rank", r, ".log")));
  }
  std::vector<int> codes;
  for (auto& c : children) codes.push_back(c->Wait(absl::Seconds(40)));
  for (int r = 0; r < n; ++r) {
    std::printf("--- rank %d (exit %d) ---\n%s", r, codes[r],
                ReadFile(absl::StrCat(dir, "/rank", r, ".log")).c_str());
  }
  return codes;
}

TEST(GlooMultiProcessTest, ThreeProcessesAgreeWithReferences) {
  const std::string dir = MakeTempDir("zs_comm_mp_");
  ASSERT_FALSE(dir.empty());
  EXPECT_EQ(RunRanks({"check", "check", "check"}, dir), std::vector<int>({0, 0, 0}));
  std::filesystem::remove_all(dir);
}

TEST(GlooMultiProcessTest, SurvivorsSeeAnErrorWhenAPeerProcessVanishes) {
  const std::string dir = MakeTempDir("zs_comm_mp_");
  ASSERT_FALSE(dir.empty());
  // Ranks 0 and 1 must get a failed all-reduce (not hang) and exit 0.
  EXPECT_EQ(RunRanks({"survive", "survive", "vanish"}, dir), std::vector<int>({0, 0, 0}));
  std::filesystem::remove_all(dir);
}

TEST(ShmMultiProcessTest, ThreeProcessesAgreeWithReferences) {
  const std::string dir = MakeTempDir("zs_comm_mp_");
  ASSERT_FALSE(dir.empty());
  EXPECT_EQ(RunRanks({"check", "check", "check"}, dir, "shm"), std::vector<int>({0, 0, 0}));
  std::filesystem::remove_all(dir);
}

TEST(ShmMultiProcessTest, SurvivorsSeeUnavailableWhenAPeerProcessVanishes) {
  const std::string dir = MakeTempDir("zs_comm_mp_");
  ASSERT_FALSE(dir.empty());
  EXPECT_EQ(RunRanks({"survive", "survive", "vanish"}, dir, "shm"), std::vector<int>({0, 0, 0}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace zeroshard::testing
