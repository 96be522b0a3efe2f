// Predicted peak RSS of a CPU worker against its measured VmHWM: the
// planner's per-worker figure (common/run_plan.h: model state + gather
// bound + activations + the largest unit's initial values + the measured fixed
// overhead kCpuWorkerOverheadBytes), read from `zeroshard plan --json`, is
// within 15% of every worker's VmHWM as `zeroshard launch` reports it
// (workers print it when they finish), for the small and medium presets at
// N = 2 and 4 (2 steps of one micro-batch of 4 sequences per rank; the
// medium runs take ~40 s each on 2 busy cores). The test prints both figures.
#include <cstdio>
#include <regex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/subprocess.h"

namespace zeroshard {
namespace {

using testing::BinPath;
using testing::CommandResult;
using testing::MakeTempDir;
using testing::RunCommand;

struct RssCase {
  std::string model;
  int workers, stage;
};

class PeakRssTest : public ::testing::TestWithParam<RssCase> {};

TEST_P(PeakRssTest, PredictedWithinFifteenPercentOfVmHWM) {
  const RssCase run = GetParam();
  CommandResult plan = RunCommand(
      absl::StrCat(BinPath("zeroshard"), " plan --json --model ", run.model, " --workers ",
                   run.workers, " --micro-batch 4 --global-batch ", 4 * run.workers));
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  const nlohmann::json j = nlohmann::json::parse(plan.output);
  const nlohmann::json& choice = j["choices"][run.stage * 6];  // No checkpointing, no offload.
  ASSERT_EQ(choice["stage"], run.stage);
  const double predicted = choice["peak_bytes_per_rank"];

  const std::string dir = MakeTempDir("zs_peak_rss");
  CommandResult r = RunCommand(
      absl::StrCat(BinPath("zeroshard"), " launch --model ", run.model, " --workers ", run.workers,
                   " --stage ", run.stage, " --steps 2 --micro-batch 4 --global-batch ",
                   4 * run.workers, " --eval-every 0 --threads 1 --run-dir ", dir, "/run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch line;
  ASSERT_TRUE(std::regex_search(r.output, line,
                                std::regex("peak RSS \\(VmHWM\\) bytes per worker:([ 0-9]+)")))
      << r.output;
  std::istringstream in(line[1].str());
  int workers = 0;
  for (double measured; in >> measured; ++workers) {
    std::printf("%s N=%d stage %d worker %d: predicted %.1f MB, measured VmHWM %.1f MB (%+.1f%%)\n",
                run.model.c_str(), run.workers, run.stage, workers, predicted / 1e6, measured / 1e6,
                100 * (predicted - measured) / measured);
    EXPECT_NEAR(predicted, measured, 0.15 * measured) << "worker " << workers;
  }
  EXPECT_EQ(workers, run.workers) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Presets, PeakRssTest,
                         ::testing::Values(RssCase{"small", 2, 0}, RssCase{"small", 4, 3},
                                           RssCase{"medium", 2, 1}, RssCase{"medium", 4, 3}),
                         [](const ::testing::TestParamInfo<RssCase>& info) {
                           return absl::StrCat(info.param.model, "_N", info.param.workers, "_stage",
                                               info.param.stage);
                         });

}  // namespace
}  // namespace zeroshard
