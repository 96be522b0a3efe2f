// Job config JSON round trip and validation; step record round trip; the
// learning-rate schedule's shape.
#include "common/model/job_config.h"

#include "gtest/gtest.h"
#include "worker/trainer/step_record.h"

namespace zeroshard {
namespace {

TEST(JobConfigTest, JsonRoundTrip) {
  JobConfig c;
  c.model = "tiny";
  c.stage = 2;
  c.data = {"/a", "/b"};
  c.compute_dtype = DType::kBf16;
  c.checkpoint_dir = "/ckpt";
  c.checkpoint_every = 5;
  c.collective_timeout_s = 7.5;
  c.checkpoint_timeout_s = 90;
  c.rpc_timeout_s = 4;
  c.trigger_poll_timeout_s = 0.5;
  c.max_failures = 3;
  auto back = JobConfig::FromJson(c.ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->model, "tiny");
  EXPECT_EQ(back->stage, 2);
  EXPECT_EQ(back->data, c.data);
  EXPECT_EQ(back->compute_dtype, DType::kBf16);
  EXPECT_EQ(back->checkpoint_every, 5);
  EXPECT_EQ(back->collective_timeout(), absl::Seconds(7.5));
  EXPECT_EQ(back->checkpoint_timeout(), absl::Seconds(90));
  EXPECT_EQ(back->rpc_timeout(), absl::Seconds(4));
  EXPECT_EQ(back->trigger_poll_timeout(), absl::Milliseconds(500));
  EXPECT_EQ(back->max_failures, 3);
  EXPECT_EQ(JobConfig::FromJson("{}")->max_failures, JobConfig::kDefaultMaxFailures);
}

TEST(JobConfigTest, BadInputNamesTheField) {
  EXPECT_NE(JobConfig::FromJson("[1]").status().message().find("not a JSON object"),
            std::string::npos);
  EXPECT_NE(JobConfig::FromJson(R"({"stgae": 1})").status().message().find("stgae"),
            std::string::npos);
  EXPECT_NE(JobConfig::FromJson(R"({"stage": 7})").status().message().find("stage"),
            std::string::npos);
  EXPECT_NE(JobConfig::FromJson(R"({"stage": "x"})").status().message().find("wrong type"),
            std::string::npos);
  EXPECT_NE(JobConfig::FromJson(R"({"compute_dtype": "fp8"})").status().message().find("fp8"),
            std::string::npos);
  EXPECT_NE(JobConfig::FromJson(R"({"backend": "nccl"})").status().message().find("gloo"),
            std::string::npos);  // The default device is the CPU.
  EXPECT_NE(JobConfig::FromJson(R"({"device": "tpu"})").status().message().find("device"),
            std::string::npos);
  EXPECT_NE(JobConfig::FromJson(R"({"backend": "mpi"})").status().message().find("backend"),
            std::string::npos);
  EXPECT_TRUE(JobConfig::FromJson(R"({"device": "cuda", "backend": "nccl"})").ok());
  EXPECT_TRUE(JobConfig::FromJson(R"({"device": "cpu", "backend": "shm"})").ok());
  EXPECT_NE(JobConfig::FromJson(R"({"device": "cuda", "backend": "shm"})")
                .status()
                .message()
                .find("shm moves host memory"),
            std::string::npos);
  EXPECT_NE(JobConfig::FromJson(R"({"checkpoint_timeout_s": 0})")
                .status()
                .message()
                .find("checkpoint_timeout_s"),
            std::string::npos);
  EXPECT_NE(
      JobConfig::FromJson(R"({"rpc_timeout_s": -1})").status().message().find("rpc_timeout_s"),
      std::string::npos);
  EXPECT_NE(
      JobConfig::FromJson(R"({"checkpoint_every": 3})").status().message().find("checkpoint_dir"),
      std::string::npos);
  EXPECT_EQ(JobConfig::FromJson(R"({"max_failures": -1})").status().message(),
            "job config: max_failures = -1 must be in [0, 1e6]");
  EXPECT_TRUE(JobConfig::FromJson(R"({"max_failures": 0})").ok());
}

TEST(JobConfigTest, WarmupThenCosineToTenth) {
  JobConfig c;
  c.lr = 1.0;
  c.warmup_steps = 10;
  c.steps = 110;
  EXPECT_DOUBLE_EQ(LearningRateAt(c, 0), 0.1);
  EXPECT_DOUBLE_EQ(LearningRateAt(c, 9), 1.0);
  EXPECT_NEAR(LearningRateAt(c, 60), 0.55, 1e-12);  // halfway: (1 + 0.1) / 2
  EXPECT_NEAR(LearningRateAt(c, 110), 0.1, 1e-12);
}

TEST(StepRecordTest, JsonLineRoundTrip) {
  StepRecord r;
  r.step = 7;
  r.loss = 2.5;
  r.val_loss = 2.75;
  r.world_size = 2;
  r.generation = 3;
  r.stage = 3;
  r.step_seconds = 0.5;
  r.tokens_per_second = 2048;
  RankStepStats s;
  s.memory = {1, 2, 3, 4, 9, 11, 13};
  s.peak_memory = {5, 6, 7, 8, 10, 12, 14};
  s.comm_bytes = {100, 200, 300};
  s.comm_seconds = {0.1, 0.2, 0.3};
  r.ranks = {s, RankStepStats::Unpack(s.Pack().data())};
  auto back = StepRecord::FromJsonLine(r.ToJsonLine());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->step, 7);
  EXPECT_EQ(back->val_loss, 2.75);
  ASSERT_EQ(back->ranks.size(), 2u);
  EXPECT_EQ(back->ranks[1].peak_memory.buffers, 8);
  EXPECT_EQ(back->ranks[1].peak_memory.redundancy, 10);  // Through Pack and the JSON line.
  EXPECT_EQ(back->ranks[0].memory.redundancy, 9);
  EXPECT_EQ(back->ranks[1].peak_memory.offloaded, 12);
  EXPECT_EQ(back->ranks[0].memory.offloaded, 11);
  EXPECT_EQ(back->ranks[1].peak_memory.activations, 14);
  EXPECT_EQ(back->ranks[0].memory.activations, 13);
  EXPECT_EQ(back->ranks[1].comm_bytes[2], 300);
  EXPECT_DOUBLE_EQ(back->ranks[0].comm_seconds[1], 0.2);
  EXPECT_FALSE(StepRecord::FromJsonLine("{\"step\": 1}").ok());
}

TEST(StepRecordTest, EventsRoundTripAndAreAbsentOnOrdinarySteps) {
  StepRecord r;
  r.step = 12;
  r.world_size = 3;
  const std::string plain = r.ToJsonLine();
  EXPECT_EQ(plain.find("events"), std::string::npos) << plain;
  r.events = {"restored_checkpoint", "left"};
  r.start_step = 10;
  r.live_refused = "shard 1 of unit 0 has no holder";
  r.leaving = {0, 2};
  auto back = StepRecord::FromJsonLine(r.ToJsonLine());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->events, r.events);
  EXPECT_EQ(back->start_step, 10);
  EXPECT_EQ(back->live_refused, r.live_refused);
  EXPECT_EQ(back->leaving, r.leaving);
  auto ordinary = StepRecord::FromJsonLine(plain);
  ASSERT_TRUE(ordinary.ok());
  EXPECT_TRUE(ordinary->events.empty());
  EXPECT_EQ(ordinary->start_step, -1);
}

// The coordinator's --checkpoint-dir is applied before validation, so a
// job with checkpoint_every and no checkpoint_dir of its own is served.
TEST(JobConfigTest, ServedConfigTakesTheCoordinatorsCheckpointDirBeforeValidating) {
  const std::string json = "{\"checkpoint_every\": 5}";
  EXPECT_FALSE(JobConfig::FromJson(json).ok());
  auto served = PrepareServedJobConfig(json, "/ckpt");
  ASSERT_TRUE(served.ok()) << served.status();
  auto config = JobConfig::FromJson(*served);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->checkpoint_dir, "/ckpt");
  EXPECT_EQ(config->checkpoint_every, 5);
  auto refused = PrepareServedJobConfig(json, "");
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("checkpoint_every"), std::string::npos)
      << refused.status();
  // Redundancy fields round-trip and are validated.
  EXPECT_FALSE(JobConfig::FromJson("{\"redundancy\": 2}").ok());
  auto r = JobConfig::FromJson("{\"redundancy\": 1, \"redundancy_every\": 3}");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(JobConfig::FromJson(r->ToJson())->redundancy_every, 3);
}

TEST(JobConfigTest, OffloadFieldsRoundTripAndAreValidated) {
  auto c = JobConfig::FromJson(R"({"offload_optimizer": "nvme", "offload_dir": "/scratch"})");
  ASSERT_TRUE(c.ok()) << c.status();
  auto back = JobConfig::FromJson(c->ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->offload_optimizer, OptimizerOffload::kNvme);
  EXPECT_EQ(back->offload_dir, "/scratch");
  EXPECT_EQ(JobConfig{}.offload_optimizer, OptimizerOffload::kNone);
  EXPECT_EQ(JobConfig{}.offload_prefetch, 2);
  // Stage-3 parameter offload is accepted, with its prefetch distance.
  auto p = JobConfig::FromJson(
      R"({"stage": 3, "offload_params": "nvme", "offload_dir": "/scratch", "offload_prefetch": 4})");
  ASSERT_TRUE(p.ok()) << p.status();
  auto p_back = JobConfig::FromJson(p->ToJson());
  ASSERT_TRUE(p_back.ok()) << p_back.status();
  EXPECT_EQ(p_back->offload_params, ParamsOffload::kNvme);
  EXPECT_EQ(p_back->offload_prefetch, 4);
  for (const char* bad :
       {R"({"offload_optimizer": "disk"})", R"({"offload_optimizer": "nvme"})",
        R"({"offload_params": "host"})", R"({"offload_prefetch": -1})",
        R"({"offload_prefetch": 65})", R"({"stage": 3, "offload_params": "nvme"})",
        R"({"stage": 2, "offload_params": "nvme", "offload_dir": "/scratch"})"}) {
    auto r = JobConfig::FromJson(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("offload"), std::string::npos) << r.status();
  }
}

TEST(JobConfigTest, ActivationCheckpointingRoundTripsAndIsValidated) {
  EXPECT_EQ(JobConfig{}.activation_checkpointing, ActivationCheckpointing::kNone);
  auto c = JobConfig::FromJson(R"({"activation_checkpointing": "blocks"})");
  ASSERT_TRUE(c.ok()) << c.status();
  auto back = JobConfig::FromJson(c->ToJson());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->activation_checkpointing, ActivationCheckpointing::kBlocks);
  auto bad = JobConfig::FromJson(R"({"activation_checkpointing": "layers"})");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("activation_checkpointing"), std::string::npos)
      << bad.status();
  EXPECT_NE(bad.status().message().find("layers"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace zeroshard
