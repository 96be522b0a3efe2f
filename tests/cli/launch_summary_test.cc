// The end-of-launch table (cli/launch_summary.h): every rank's model-state
// memory next to the ZeRO formula, and an `offloaded` column only when some
// rank moved state out of device memory. Values worked out by hand.
#include "cli/launch_summary.h"

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace zeroshard::cli {
namespace {

ProgressState OneStep(int64_t offloaded) {
  StepRecord r;
  r.step = 1;
  r.loss = 5.0;
  r.world_size = 1;
  r.generation = 1;
  RankStepStats rank;
  rank.peak_memory.params = 1 << 20;  // 1 MiB.
  rank.peak_memory.grads = 1 << 20;
  rank.peak_memory.optimizer = 3 << 19;  // 1.5 MiB of staging.
  rank.peak_memory.offloaded = offloaded;
  r.ranks.push_back(rank);
  ProgressState p;
  p.Add(r);
  return p;
}

TEST(LaunchSummaryTest, OffloadedColumnOnlyWhenStateIsOffloaded) {
  const ProgressState offloaded = OneStep(12 << 20);
  SummaryInputs in{&offloaded, 3, 1 << 18, 4, 4, 1.0};
  const std::string with = FormatSummary(in);
  EXPECT_NE(with.find("offloaded"), std::string::npos) << with;
  // params + grads + optimizer = 3.5 MiB on the device, no activations
  // reported; 12 MiB offloaded.
  const size_t row = with.find("  rank 0 ");
  ASSERT_NE(row, std::string::npos) << with;
  std::vector<std::string> cells =
      absl::StrSplit(with.substr(row, with.find('\n', row) - row), ' ', absl::SkipEmpty());
  EXPECT_EQ(cells, (std::vector<std::string>{"rank", "0", "1.000", "1.000", "1.500", "0.000",
                                             "3.500", "0.000", "12.000"}))
      << with;

  const ProgressState resident = OneStep(0);
  in.progress = &resident;
  const std::string without = FormatSummary(in);
  EXPECT_EQ(without.find("offloaded"), std::string::npos) << without;
}

}  // namespace
}  // namespace zeroshard::cli
