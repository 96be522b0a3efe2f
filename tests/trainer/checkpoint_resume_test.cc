// Checkpoints through `zeroshard launch`, end to end: 12 steps at N = 4 stage
// 3 with a checkpoint at step 6; resuming from it at N = 4 (stage 3), N = 3
// (stage 2) and N = 1 (stage 0) gives steps 7-12 the losses of the
// uninterrupted run within 1e-5 relative (fp32). Shards are ranges of flat
// units, so the checkpoint restores under any shard plan.
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"
#include "worker/trainer/step_record.h"

namespace zeroshard {
namespace {

using testing::BinPath;
using testing::CommandResult;
using testing::MakeTempDir;
using testing::RunCommand;

std::map<int64_t, double> LossByStep(const std::string& log_path) {
  std::map<int64_t, double> losses;
  std::ifstream in(log_path);
  for (std::string line; std::getline(in, line);) {
    auto record = StepRecord::FromJsonLine(line);
    if (record.ok()) losses[record->step] = record->loss;
  }
  return losses;
}

CommandResult Launch(const std::string& dir, const std::string& name, const std::string& args) {
  return RunCommand(absl::StrCat(
      BinPath("zeroshard"), " launch --model small --steps 12 --global-batch 16 --micro-batch 4",
      " --threads 1 --eval-every 0 --seed 11 --checkpoint-dir ", dir, "/ckpt --run-dir ", dir,
      "/", name, " --log ", dir, "/", name, ".jsonl ", args));
}

TEST(CheckpointResumeTest, ResumesAtAnyWorldSizeAndStage) {
  const std::string dir = MakeTempDir("zs_resume");
  CommandResult full = Launch(dir, "full", "--workers 4 --stage 3 --checkpoint-every 6");
  ASSERT_EQ(full.exit_code, 0) << full.output;
  const std::map<int64_t, double> reference = LossByStep(dir + "/full.jsonl");
  ASSERT_EQ(reference.size(), 12u) << full.output;

  struct Resume { int workers, stage; };
  for (Resume r : {Resume{4, 3}, Resume{3, 2}, Resume{1, 0}}) {
    const std::string name = absl::StrCat("resume_n", r.workers, "_s", r.stage);
    CommandResult run = Launch(dir, name, absl::StrCat("--workers ", r.workers, " --stage ",
                                                       r.stage, " --resume-step 6"));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const std::map<int64_t, double> resumed = LossByStep(dir + "/" + name + ".jsonl");
    ASSERT_EQ(resumed.size(), 6u) << name << ": " << run.output;
    for (const auto& [step, loss] : resumed) {
      ASSERT_GE(step, 7) << name;
      EXPECT_NEAR(loss, reference.at(step), 1e-5 * reference.at(step))
          << name << " step " << step;
    }
  }
}

TEST(CheckpointResumeTest, ResumeWithoutCheckpointFailsClearly) {
  const std::string dir = MakeTempDir("zs_resume_none");
  CommandResult run = Launch(dir, "run", "--workers 2 --stage 1 --resume");
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("no committed checkpoint"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace zeroshard
