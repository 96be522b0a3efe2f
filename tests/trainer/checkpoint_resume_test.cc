// Checkpoints through `zeroshard launch`, end to end: 12 steps at N = 4 stage
// 3 with a checkpoint at step 6; resuming from it at N = 4 (stage 3), N = 3
// (stage 2) and N = 1 (stage 0) gives steps 7-12 the losses of the
// uninterrupted run within 1e-5 relative (fp32). Shards are ranges of flat
// units, so the checkpoint restores under any shard plan. The saving run
// keeps its optimizer state in NVMe files and the resumed runs put theirs in
// device memory, host memory or NVMe files: offload changes where state
// lives, not what a checkpoint holds (engine_offload_test shows offloaded
// runs bit-equal to resident ones).
// Stage-3 parameter offload (--offload-params nvme) through launch: the
// `tiny` model at N = 2 gives exactly the losses of the run without it, and
// a checkpoint saved with it resumes without it (and vice versa) with
// exactly the uninterrupted run's losses.
#include <signal.h>

#include <regex>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/support/file_watch.h"
#include "tests/support/subprocess.h"
#include "tests/trainer/step_log.h"
#include "worker/trainer/step_record.h"

namespace zeroshard {
namespace {

using testing::BinPath;
using testing::CommandResult;
using testing::MakeTempDir;
using testing::ReadStepRecords;
using testing::RunCommand;

std::map<int64_t, double> LossByStep(const std::string& log_path) {
  std::map<int64_t, double> losses;
  for (const StepRecord& record : ReadStepRecords(log_path)) losses[record.step] = record.loss;
  return losses;
}

CommandResult Launch(const std::string& dir, const std::string& name, const std::string& args) {
  return RunCommand(absl::StrCat(
      BinPath("zeroshard"), " launch --model small --steps 12 --global-batch 16 --micro-batch 4",
      " --threads 1 --eval-every 0 --seed 11 --checkpoint-dir ", dir, "/ckpt --run-dir ", dir, "/",
      name, " --log ", dir, "/", name, ".jsonl ", args));
}

TEST(CheckpointResumeTest, ResumesAtAnyWorldSizeAndStage) {
  const std::string dir = MakeTempDir("zs_resume");
  CommandResult full = Launch(dir, "full",
                              absl::StrCat("--workers 4 --stage 3 --checkpoint-every 6"
                                           " --offload-optimizer nvme --offload-dir ",
                                           dir));
  ASSERT_EQ(full.exit_code, 0) << full.output;
  const std::map<int64_t, double> reference = LossByStep(dir + "/full.jsonl");
  ASSERT_EQ(reference.size(), 12u) << full.output;

  struct Resume {
    int workers, stage;
    const char* offload;
  };
  for (Resume r :
       {Resume{4, 3, "none"}, Resume{3, 2, "host"}, Resume{1, 0, "none"}, Resume{2, 1, "nvme"}}) {
    const std::string name = absl::StrCat("resume_n", r.workers, "_s", r.stage, "_", r.offload);
    CommandResult run = Launch(
        dir, name,
        absl::StrCat("--workers ", r.workers, " --stage ", r.stage,
                     " --resume-step 6 --offload-optimizer ", r.offload, " --offload-dir ", dir));
    ASSERT_EQ(run.exit_code, 0) << run.output;
    const std::map<int64_t, double> resumed = LossByStep(dir + "/" + name + ".jsonl");
    ASSERT_EQ(resumed.size(), 6u) << name << ": " << run.output;
    for (const auto& [step, loss] : resumed) {
      ASSERT_GE(step, 7) << name;
      EXPECT_NEAR(loss, reference.at(step), 1e-5 * reference.at(step)) << name << " step " << step;
    }
  }
}

// `tiny` at N = 2, stage 3, 8 steps; run dir and step log named `name`.
CommandResult LaunchTiny(const std::string& dir, const std::string& name, const std::string& args) {
  return RunCommand(absl::StrCat(
      BinPath("zeroshard"), " launch --model tiny --workers 2 --stage 3 --steps 8",
      " --global-batch 8 --micro-batch 2 --threads 1 --eval-every 0 --seed 5 --checkpoint-dir ",
      dir, "/ckpt --run-dir ", dir, "/", name, " --log ", dir, "/", name, ".jsonl ", args));
}

TEST(CheckpointResumeTest, ParamOffloadGivesTheSameLossesAndCheckpoints) {
  const std::string plain = MakeTempDir("zs_poff_plain"), poff = MakeTempDir("zs_poff");
  const std::string offload =
      absl::StrCat(" --offload-params nvme --offload-prefetch 1 --offload-dir ", poff);
  CommandResult a = LaunchTiny(plain, "full", "--checkpoint-every 4");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  CommandResult b = LaunchTiny(poff, "full", "--checkpoint-every 4" + offload);
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const std::map<int64_t, double> want = LossByStep(plain + "/full.jsonl");
  ASSERT_EQ(want.size(), 8u) << a.output;
  EXPECT_EQ(LossByStep(poff + "/full.jsonl"), want) << b.output;
  // Saved with params offload, resumed without; and the other way round.
  for (auto [dir, args] : {std::pair{poff, std::string()}, std::pair{plain, offload}}) {
    CommandResult r = LaunchTiny(dir, "resumed", "--resume-step 4" + args);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::map<int64_t, double> resumed = LossByStep(dir + "/resumed.jsonl");
    ASSERT_EQ(resumed.size(), 4u) << r.output;
    for (const auto& [step, loss] : resumed)
      EXPECT_EQ(loss, want.at(step)) << dir << " step " << step;
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

namespace zeroshard {
namespace {

// `zeroshard checkpoint now` during a launch, with the admin token the
// launch wrote: the trainers save at their next step (a step that is no
// multiple of --checkpoint-every), and `checkpoint list` shows it; without
// a token the coordinator refuses.
TEST(CheckpointResumeTest, CheckpointNowSavesAtTheNextStep) {
  const std::string dir = MakeTempDir("zs_ckpt_now");
  ChildProcess launch(
      {BinPath("zeroshard"), "launch", "--workers", "2", "--model", "tiny", "--steps", "100000",
       "--checkpoint-dir", dir + "/ckpt", "--run-dir", dir + "/run"},
      dir + "/launch.out");
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  // The launch prints the coordinator's address before any worker starts.
  ASSERT_TRUE(testing::WaitForStep(dir + "/run/steps.jsonl", 1, 0, deadline - absl::Now()))
      << testing::ReadFile(dir + "/launch.out");
  std::smatch address;
  const std::string text = testing::ReadFile(dir + "/launch.out");
  ASSERT_TRUE(std::regex_search(text, address, std::regex("coordinator on (127.0.0.1:[0-9]+)")))
      << text;
  // The launch's tokens are its own: the user's CLI presents the admin one.
  const std::string coordinator =
      absl::StrCat(address[1].str(), " --token-file ", dir, "/run/admin-token");
  CommandResult now =
      RunCommand(absl::StrCat(BinPath("zeroshard"), " checkpoint now --coordinator ", coordinator));
  ASSERT_EQ(now.exit_code, 0) << now.output;
  const CommandResult anonymous = RunCommand(
      absl::StrCat(BinPath("zeroshard"), " checkpoint now --coordinator ", address[1].str()));
  EXPECT_NE(anonymous.exit_code, 0) << anonymous.output;
  EXPECT_NE(anonymous.output.find("bearer token"), std::string::npos) << anonymous.output;
  // A checkpoint commits by its directory's rename into --checkpoint-dir.
  CommandResult list;
  EXPECT_TRUE(testing::WaitForFiles(
      dir + "/ckpt",
      [&] {
        list = RunCommand(
            absl::StrCat(BinPath("zeroshard"), " checkpoint list --coordinator ", coordinator));
        return list.exit_code == 0 && list.output.find("step-") != std::string::npos;
      },
      deadline - absl::Now()))
      << list.output;
  launch.Signal(SIGINT);
  EXPECT_EQ(launch.Wait(absl::Seconds(30)), 130);
}

}  // namespace
}  // namespace zeroshard
