// `zeroshard launch` end to end, as a user runs it (real binaries, loopback):
// loss curves agree across world sizes and stages; bad requests fail in one
// clear line with nothing left running; Ctrl-C stops every process.
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"
#include "tests/trainer/step_log.h"
#include "worker/model/gpt_model.h"
#include "worker/trainer/step_record.h"

namespace zeroshard {
namespace {

using testing::BinPath;
using testing::CommandResult;
using testing::MakeTempDir;
using testing::ReadFile;
using testing::ReadStepRecords;
using testing::RunCommand;

std::vector<double> Losses(const std::string& log_path) {
  std::vector<double> losses;
  for (const StepRecord& record : ReadStepRecords(log_path)) losses.push_back(record.loss);
  return losses;
}

CommandResult Launch(const std::string& args) {
  return RunCommand(absl::StrCat(BinPath("zeroshard"), " launch ", args));
}

// Data order depends only on (seed, step) and the loss is the mean over the
// global batch, so N = 1 at stage 0 and N = 2, 3, 4 at stages 2-3 follow the
// same curve up to float summation order (issue: within 1e-4 relative).
TEST(LaunchTest, LossCurvesAgreeAcrossWorldSizesAndStages) {
  const std::string dir = MakeTempDir("zs_launch_curves");
  // N = 3 splits 16 sequences 5/5/6; with micro-batches of 1 the ranks run
  // 6 micro-batches each, the short ones padding.
  struct Run {
    int workers, stage, micro_batch;
  };
  std::vector<std::vector<double>> curves;
  for (Run run : {Run{1, 0, 4}, Run{2, 2, 4}, Run{3, 3, 4}, Run{4, 3, 4}, Run{3, 1, 1}}) {
    const std::string log =
        absl::StrCat(dir, "/n", run.workers, "s", run.stage, "m", run.micro_batch, ".jsonl");
    CommandResult r = Launch(absl::StrCat("--workers ", run.workers, " --stage ", run.stage,
                                          " --micro-batch ", run.micro_batch,
                                          " --steps 10 --model small --global-batch 16 --threads 1"
                                          " --eval-every 0 --seed 7 --run-dir ",
                                          dir, "/run", run.workers, " --log ", log));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    curves.push_back(Losses(log));
    ASSERT_EQ(curves.back().size(), 10u) << r.output;
  }
  for (size_t c = 1; c < curves.size(); ++c) {
    for (size_t s = 0; s < 10; ++s) {
      EXPECT_NEAR(curves[c][s], curves[0][s], 1e-4 * std::abs(curves[0][s]))
          << "run " << c << " step " << s + 1;
    }
  }
  EXPECT_LT(curves[0][9], curves[0][0]);  // It trains.
}

// --linger keeps the embedded coordinator up after the job (for a last
// scrape); with /metrics on an ephemeral port the default is not to wait.
TEST(LaunchTest, LingerKeepsTheCoordinatorUpForAFinalScrape) {
  const std::string dir = MakeTempDir("zs_launch_linger");
  const std::string common = absl::StrCat(" --workers 1 --steps 2 --model tiny --eval-every 0",
                                          " --threads 1 --run-dir ", dir, "/run");
  const absl::Time start = absl::Now();
  CommandResult lingered = Launch(common + " --linger 1");
  EXPECT_EQ(lingered.exit_code, 0) << lingered.output;
  EXPECT_NE(lingered.output.find("keeping the coordinator's /metrics up for 1 s"),
            std::string::npos)
      << lingered.output;
  EXPECT_GE(absl::Now() - start, absl::Seconds(1));
  CommandResult plain = Launch(common);
  EXPECT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_EQ(plain.output.find("keeping the coordinator"), std::string::npos) << plain.output;
}

TEST(LaunchTest, BadRequestsFailInOneClearLine) {
  const std::string dir = MakeTempDir("zs_launch_bad");
  struct Case {
    std::string args, expect;
    int code;
  };
  std::vector<Case> cases = {
      {"--data /no/such/path --steps 1", "/no/such/path", 2},
      {absl::StrCat("--data ", dir, " --steps 1"), dir, 2},  // empty directory
      {"--model enormous --steps 1", "enormous", 2},
      {"--stage 5", "--stage", 2},
      {"--model gpt2-xl --workers 4 --steps 1", "GiB", 2},
      {"--coordinator 127.0.0.1:1 --steps 1", "no reachable coordinator", 1},
      {absl::StrCat("--checkpoint-dir ", dir, "/ckpt --steps 1"), "--resume", 2},
      {"--device cpu --backend nccl --steps 1", "on the CPU use gloo", 2},
  };
  if (RunCommand("nvidia-smi -L").exit_code != 0) {  // No GPU here: --device cuda must say so.
    cases.push_back({"--device cuda --steps 1", "--device cuda: ", 2});
  } else {  // A GPU here: more workers than GPUs on NCCL names the backend that shares them.
    cases.push_back({"--device cuda --workers 64 --steps 1", "--backend host-staged", 2});
  }
  std::filesystem::create_directories(dir + "/ckpt/step-00000004");
  for (const Case& c : cases) {
    const absl::Time start = absl::Now();
    CommandResult r = Launch(absl::StrCat(c.args, " --run-dir ", dir, "/run"));
    EXPECT_EQ(r.exit_code, c.code) << c.args << ": " << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.args << ": " << r.output;
    EXPECT_LT(absl::Now() - start, absl::Seconds(30)) << c.args;
  }
}

// --activation-checkpointing blocks recomputes each block in backward;
// gradients are bit-equal to the run without it (activation_checkpointing_test),
// so the losses through 2 worker processes at stage 3 are identical, while
// each rank reports fewer activation bytes: exactly ModelActivationBytes at
// its last micro-batch (4 sequences per rank in micro-batches of 2). A bad
// value exits 2 in one line naming the flag.
TEST(LaunchTest, ActivationCheckpointingKeepsTheLosses) {
  const std::string dir = MakeTempDir("zs_launch_ackpt");
  const ModelConfig small = *ModelPreset("small");
  std::vector<std::vector<StepRecord>> runs;
  for (std::string mode : {"none", "blocks"}) {
    const std::string log = absl::StrCat(dir, "/", mode, ".jsonl");
    CommandResult r = Launch(absl::StrCat(
        "--workers 2 --stage 3 --steps 3 --model small --global-batch 8 --micro-batch 2",
        " --threads 1 --eval-every 0 --seed 5 --activation-checkpointing ", mode, " --run-dir ",
        dir, "/", mode, " --log ", log));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output.find("activation checkpointing blocks") != std::string::npos,
              mode == "blocks")
        << r.output;
    runs.push_back(ReadStepRecords(log));
    ASSERT_EQ(runs.back().size(), 3u) << r.output;
    const ActivationCheckpointing m = *ParseActivationCheckpointing(mode);
    for (const RankStepStats& rank : runs.back().back().ranks) {
      EXPECT_EQ(rank.memory.activations, ModelActivationBytes(small, 2, small.n_ctx, m)) << mode;
    }
  }
  for (size_t s = 0; s < 3; ++s) EXPECT_EQ(runs[1][s].loss, runs[0][s].loss) << "step " << s + 1;
  EXPECT_LT(runs[1][2].ranks[0].peak_memory.activations,
            runs[0][2].ranks[0].peak_memory.activations);

  CommandResult bad =
      Launch(absl::StrCat("--model tiny --steps 1 --activation-checkpointing "
                          "layers --run-dir ",
                          dir, "/bad"));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--activation-checkpointing"), std::string::npos) << bad.output;
  EXPECT_EQ(std::count(bad.output.begin(), bad.output.end(), '\n'), 1) << bad.output;
}

TEST(LaunchTest, InterruptStopsEveryProcess) {
  const std::string dir = MakeTempDir("zs_launch_int");
  const std::string out = dir + "/launch.out";
  ChildProcess launch({BinPath("zeroshard"), "launch", "--workers", "2", "--model", "tiny",
                       "--steps", "100000", "--run-dir", dir + "/run"},
                      out);
  ASSERT_TRUE(testing::WaitForStep(dir + "/run/steps.jsonl", 1, 0, absl::Seconds(60)))
      << ReadFile(out);
  std::smatch port;
  const std::string text = ReadFile(out);
  ASSERT_TRUE(std::regex_search(text, port, std::regex("coordinator on (127.0.0.1:[0-9]+)")));
  launch.Signal(SIGINT);
  EXPECT_EQ(launch.Wait(absl::Seconds(30)), 130) << ReadFile(out);
  CommandResult left =
      RunCommand(absl::StrCat("pgrep -f 'zeroshard-worke[r] --coordinator ", port[1].str(), "'"));
  EXPECT_NE(left.exit_code, 0) << "workers still running: " << left.output;
}

}  // namespace
}  // namespace zeroshard
