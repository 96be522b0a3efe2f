// Elastic training without rollback, with separate coordinator and worker
// processes on loopback as in Kubernetes. The job keeps no checkpoints at
// all, so the only way to go on without training a step twice is live
// resharding (worker/trainer/live_reshard.h).
// - Scale-up 2 -> 4 while training: the joiners are admitted at a step
//   boundary, every step is trained exactly once, and the losses equal an
//   uninterrupted 4-worker run of the same job within 2e-5 relative (fp32;
//   the data order does not depend on the world size; the summation order
//   does: with 12 samples a step, where N = 2 reduced both micro-batches in
//   one reduce-scatter and N = 4 one, they were 1.0e-5 apart after 300
//   steps; with 96, 5.8e-7; a lost or repeated step shows in the step
//   records, which LossesOnce checks).
#include "tests/trainer/live_run.h"

namespace zeroshard {
namespace {

TEST(ElasticLiveTest, ScaleUpTwoToFourReshardsLiveWithNoStepLost) {
  LiveRun run;
  const std::string dir = MakeTempDir("zs_live_up");
  JobConfig job = LiveJob(dir);
  // Long enough for the joiners to start up and join. With 12 samples a
  // step, 300 steps took ~0.5 s, and the joiners (start-up, then the 0.5 s
  // settle) came in at step 210-299, or after the end (1 run in 3 on the
  // 2-core VM, 2026-12-06); with 96 they come in at step 103-127.
  job.steps = 400;
  job.global_batch = 96;
  ASSERT_TRUE(run.Start(dir, job, 2)) << run.Logs();
  run.AddWorkers(2);
  ASSERT_TRUE(WaitForStep(job.log_path, 8)) << run.Logs();
  run.AddWorkers(2);
  for (auto& w : run.workers) EXPECT_EQ(w->Wait(absl::Seconds(120)), 0) << run.Logs();
  run.Stop();

  const std::vector<StepRecord> records = ReadStepRecords(job.log_path);
  const std::map<int64_t, double> losses = LossesOnce(records, job.steps);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.front().world_size, 2);
  EXPECT_EQ(records.back().world_size, 4);
  // The 2-worker generation handed off for the joiners and the 4-worker one
  // started from that state, live; no checkpoint was read.
  EXPECT_FALSE(WithEvent(records, "handed_off").empty()) << run.Logs();
  const std::vector<StepRecord> live = WithEvent(records, "resharded_live");
  ASSERT_FALSE(live.empty()) << run.Logs();
  EXPECT_EQ(live.back().world_size, 4);
  EXPECT_TRUE(WithEvent(records, "restored_checkpoint").empty()) << run.Logs();
  ExpectSameLosses(losses, Uninterrupted(job, 4), 2e-5);
}

}  // namespace
}  // namespace zeroshard
