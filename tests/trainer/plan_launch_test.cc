// `zeroshard plan` and `zeroshard launch --stage auto` as a user runs them
// (real binaries, loopback):
// - plan reproduces the classic 7B example (14 GB bf16 weights, 14 GB
//   gradients, 84 GB optimizer state per GPU at stage 0, computed by hand:
//   2, 2 and 12 bytes a parameter), says what --params alone cannot give,
//   and its JSON carries the same figures; bad values exit 2 in one line
//   naming the flag;
// - launch --stage auto picks stage 0 for the tiny model on this machine and
//   says why; with a forced small memory figure (ZEROSHARD_MEMORY_AVAILABLE,
//   cli/launch_plan.h) between stage 1's and stage 0's need (taken from
//   plan --json) it picks stage 1; with one far too small it refuses with
//   the breakdown; a fixed stage that does not fit is refused the same way.
#include <algorithm>

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

CommandResult Zs(const std::string& args) {
  return RunCommand(absl::StrCat(BinPath("zeroshard"), " ", args));
}

// Runs of spaces as one space.
std::string Squeeze(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (ch != ' ' || out.empty() || out.back() != ' ') out.push_back(ch);
  }
  return out;
}

TEST(PlanCommandTest, ClassicSevenBillionExample) {
  CommandResult r =
      Zs("plan --params 7B --workers 4 --compute-dtype bf16 --reduce-dtype bf16 "
         "--device-memory 80GB --host-memory 1TB --link-bandwidth 100");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Stage 0 row: 14.00 weights, 14.00 grads, 84.00 optimizer (GB); stage 3
  // at N = 4 a quarter of each (whitespace collapsed: the columns' widths
  // are layout).
  const std::string text = Squeeze(r.output);
  EXPECT_NE(text.find("sizes in GB per rank"), std::string::npos) << r.output;
  EXPECT_NE(text.find("\n 0 none none | 14.00 14.00 84.00 "), std::string::npos) << r.output;
  EXPECT_NE(text.find("\n 3 none none | 3.50 3.50 21.00 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--params alone"), std::string::npos) << r.output;
  CommandResult j =
      Zs("plan --params 7e9 --workers 4 --compute-dtype bf16 --reduce-dtype bf16 "
         "--device-memory 80GB --json");
  ASSERT_EQ(j.exit_code, 0) << j.output;
  const nlohmann::json plan = nlohmann::json::parse(j.output);
  EXPECT_EQ(plan["choices"][0]["params_bytes"], 14'000'000'000);
  EXPECT_EQ(plan["choices"][0]["optimizer_bytes"], 84'000'000'000);
  // 80 GB per GPU: stage 0 (112 GB) and 1 (49 GB + ...) -- stage 1 fits.
  EXPECT_EQ(plan["recommended"], "stage 1, checkpointing none, offload none");
}

// On a GPU the worker's fit check counts the CUDA kernels' workspace beside
// the activations, so the plan does too: gpt2 at micro-batch 4 x 1024, the
// attention backward's 7 B T C + B NH T T floats (the larger of its two
// uses) = 4 * (7 * 4096 * 768 + 4 * 12 * 1024 * 1024) bytes more than on
// the CPU.
TEST(PlanCommandTest, CudaActivationsCountTheKernelsWorkspace) {
  auto activations = [](const std::string& device) -> int64_t {
    CommandResult r =
        Zs("plan --model gpt2 --workers 1 --micro-batch 4 --device-memory 140GB "
           "--host-memory 1TB --json --device " +
           device);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    if (r.exit_code != 0) return -1;
    return nlohmann::json::parse(r.output)["choices"][0]["activation_bytes"].get<int64_t>();
  };
  const int64_t cpu = activations("cpu"), cuda = activations("cuda");
  EXPECT_EQ(cuda - cpu, int64_t{4} * (7 * 4096 * 768 + int64_t{4} * 12 * 1024 * 1024));
}

TEST(PlanCommandTest, BadValuesExitTwoNamingTheFlag) {
  struct Case {
    std::string args, flag;
  };
  for (const Case& c : {Case{"--params lots", "--params"}, Case{"--model huge", "--model"},
                        Case{"--model tiny --device-memory 12XB", "--device-memory"},
                        Case{"--model tiny --link-bandwidth fast", "--link-bandwidth"},
                        Case{"--model tiny --link-backend tcp", "--link-backend"},
                        Case{"--model tiny --params 7B", "--model"},
                        Case{"--layers 2 --width 30 --heads 4 --ctx 8", "--width"},
                        Case{"--model tiny --seq-len 999", "--seq-len"}}) {
    CommandResult r = Zs("plan " + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << ": " << r.output;
    EXPECT_NE(r.output.find(c.flag), std::string::npos) << c.args << ": " << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << c.args << ": " << r.output;
  }
}

// `measure` runs an all-gather on what a local launch uses (shm on the CPU)
// unless --link-backend says gloo, and names it in the header.
TEST(PlanCommandTest, MeasuresTheLinkOnTheLaunchBackend) {
  for (const std::string backend : {"shm", "gloo"}) {
    const std::string flag = backend == "gloo" ? " --link-backend gloo" : "";
    CommandResult r = Zs("plan --model tiny --workers 2 --link-bandwidth measure" + flag);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("(measured: " + backend + " all-gather, 2 ranks here)"),
              std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("link 0.00 GB/s"), std::string::npos) << r.output;
  }
}

TEST(LaunchAutoStageTest, PicksTheLowestStageThatFits) {
  const std::string dir = MakeTempDir("zs_launch_auto");
  const std::string common = absl::StrCat(
      " --model tiny --workers 2 --steps 1 --eval-every 0 "
      "--threads 1 --run-dir ",
      dir, "/run");
  CommandResult r = Zs("launch --stage auto" + common);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--stage auto chose stage 0: it is the lowest stage that fits"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("stage 0, 1 steps"), std::string::npos) << r.output;

  // Stage 0's and stage 1's need for 2 CPU workers, from the planner.
  CommandResult j = Zs("plan --model tiny --workers 2 --micro-batch 4 --global-batch 16 --json");
  ASSERT_EQ(j.exit_code, 0) << j.output;
  const nlohmann::json plan = nlohmann::json::parse(j.output);
  const int64_t s0 = plan["choices"][0]["host_bytes_all"],
                s1 = plan["choices"][6]["host_bytes_all"];
  ASSERT_EQ(plan["choices"][6]["stage"], 1);
  ASSERT_LT(s1, s0);
  const std::string env = absl::StrCat("ZEROSHARD_MEMORY_AVAILABLE=", (s0 + s1) / 2, " ");
  r = RunCommand(absl::StrCat(env, BinPath("zeroshard"), " launch --stage auto", common));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--stage auto chose stage 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("stage 0 would need"), std::string::npos) << r.output;

  for (const std::string stage : {"auto", "0"}) {
    r = RunCommand(absl::StrCat("ZEROSHARD_MEMORY_AVAILABLE=1000000 ", BinPath("zeroshard"),
                                " launch --stage ", stage, common));
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("does not fit"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("params "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("activations "), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace zeroshard
