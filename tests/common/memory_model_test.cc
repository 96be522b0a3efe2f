// The memory and traffic model (common/memory_model.h, traffic_model.h,
// run_plan.h) on worked examples computed by hand here:
// - the classic 7B example (ZeRO paper section 3 / Figure 1 arithmetic):
//   mixed precision with Adam in plain data parallelism holds 2Ψ = 14 GB of
//   bf16 weights, 14 GB of gradients and 12Ψ = 84 GB of fp32 master weights
//   and moments per GPU; at N = 4 stage 1 keeps 21 GB of optimizer state,
//   stage 2 also 3.5 GB of gradients, stage 3 also 3.5 GB of weights;
// - padding: a plan of odd unit sizes, bytes by kind per unit by hand;
// - offload and redundancy bytes; the traffic of DESIGN.md's
//   "Communication per step" (2Ψ at stages 0-2, 3Ψ at stage 3, ring wire
//   bytes (N-1)/N of the gathered size) and the stage-3 prefetch schedule
//   of a two-block model, counted by hand;
// - the recommendation: the lowest stage that fits, checkpointing when it
//   saves a stage.
#include "common/run_plan.h"
#include "gtest/gtest.h"

namespace zeroshard {
namespace {

constexpr double kGB = 1e9;

MemoryModelInputs Bf16(int stage) {
  MemoryModelInputs in;
  in.stage = stage;
  in.compute_dtype = in.reduce_dtype = DType::kBf16;
  return in;
}

TEST(MemoryModelTest, Classic7BExample) {
  const int64_t psi = 7'000'000'000;
  const auto s0 = PredictMemoryFromParams(psi, 4, Bf16(0));
  ASSERT_TRUE(s0.ok());
  EXPECT_DOUBLE_EQ(s0->state.params / kGB, 14.0);
  EXPECT_DOUBLE_EQ(s0->state.grads / kGB, 14.0);
  EXPECT_DOUBLE_EQ(s0->state.optimizer / kGB, 84.0);
  const auto s1 = PredictMemoryFromParams(psi, 4, Bf16(1));
  const auto s2 = PredictMemoryFromParams(psi, 4, Bf16(2));
  const auto s3 = PredictMemoryFromParams(psi, 4, Bf16(3));
  EXPECT_DOUBLE_EQ(s1->state.model_state() / kGB, 14 + 14 + 21.0);
  EXPECT_DOUBLE_EQ(s2->state.model_state() / kGB, 14 + 3.5 + 21.0);
  EXPECT_DOUBLE_EQ(s3->state.model_state() / kGB, 3.5 + 3.5 + 21.0);
}

// Units of 10 and 3 elements at N = 4, alignment 2: padded to 16 and 8,
// shards of 4 and 2.
ShardPlan OddPlan() {
  auto plan =
      MakeShardPlan({{"a", {{"w", {10}, DType::kFp32}}}, {"b", {{"v", {3}, DType::kFp32}}}}, 4, 2);
  EXPECT_TRUE(plan.ok());
  return *plan;
}

TEST(MemoryModelTest, PaddingByKind) {
  const ShardPlan plan = OddPlan();
  MemoryModelInputs in;  // fp32 / fp32.
  for (int stage = 0; stage <= 3; ++stage) {
    in.stage = stage;
    const auto p = PredictMemory(plan, in);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->state.params, 4 * (stage == 3 ? 6 : 24)) << stage;
    EXPECT_EQ(p->state.grads, 4 * (stage >= 2 ? 6 : 24)) << stage;
    // fp32 compute with the state resident: the master weights are part of
    // the compute copy, so the optimizer holds m and v only.
    EXPECT_EQ(p->state.optimizer, 8 * (stage >= 1 ? 6 : 24)) << stage;
    MemoryModelInputs bf16 = in;  // A separate master beside a bf16 compute copy.
    bf16.compute_dtype = DType::kBf16;
    const auto b = PredictMemory(plan, bf16);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->state.params, 2 * (stage == 3 ? 6 : 24)) << stage;
    EXPECT_EQ(b->state.optimizer, 12 * (stage >= 1 ? 6 : 24)) << stage;
  }
  // Largest padded unit 16. Stage 3, bf16 compute, fp32 reduce, prefetch 1:
  // 2 gathers of 2 bytes, the 4-byte view, the 4-byte gradient view, a
  // 4-byte reduce-scatter staging, Step's 4: 16 * (2 * 2 + 4 + 4 + 4 + 4) + 8.
  EXPECT_EQ(GatherBufferBound(plan, 3, DType::kBf16, DType::kFp32, 1), 16 * 20 + 8);
  // fp32, prefetch 2: 16 * (3 * 4 + 4 + 4 + 4) + 8; bf16 reduce stages 2 bytes.
  EXPECT_EQ(GatherBufferBound(plan, 3, DType::kFp32, DType::kFp32, 2), 16 * 24 + 8);
  EXPECT_EQ(GatherBufferBound(plan, 3, DType::kFp32, DType::kBf16, 0), 16 * 14 + 8);
  EXPECT_EQ(GatherBufferBound(plan, 2, DType::kFp32, DType::kFp32, 1), 16 * 12 + 8);
  EXPECT_EQ(GatherBufferBound(plan, 0, DType::kFp32, DType::kFp32, 1), 16 * 8 + 8);
}

TEST(MemoryModelTest, OffloadAndRedundancy) {
  const ShardPlan plan = OddPlan();
  MemoryModelInputs in;
  in.stage = 2;
  in.offload_optimizer = OptimizerOffload::kHost;
  in.redundancy = 1;
  auto p = PredictMemory(plan, in);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->state.optimizer, 0);
  EXPECT_EQ(p->host_offload, 12 * 6);
  EXPECT_EQ(p->state.redundancy, 3 * 12 * 6);  // Peak: during a refresh.
  in.offload_optimizer = OptimizerOffload::kNvme;
  in.cuda = true;
  p = PredictMemory(plan, in);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->state.optimizer, 3 * 3 * 4096);  // Three slots of master, m, v blocks.
  EXPECT_EQ(p->nvme, 2 * 3 * 4096);             // One file a unit.
  EXPECT_EQ(p->state.buffers, 8 * 4);           // Pinned host-update staging, max n = 4.
  in.stage = 1;
  in.offload_params_nvme = true;
  EXPECT_FALSE(PredictMemory(plan, in).ok());
}

// --offload-params nvme at stage 3: params are prefetch + 1 slots of the
// largest compute shard (4 bf16 elements = 8 bytes, one 4096-byte block
// each); the files are one block per unit on top of the optimizer's.
TEST(MemoryModelTest, ParamOffloadKeepsTheStagingSlots) {
  const ShardPlan plan = OddPlan();
  MemoryModelInputs in = Bf16(3);
  in.offload_params_nvme = true;
  for (int prefetch : {0, 2, 5}) {
    in.offload_prefetch = prefetch;
    auto p = PredictMemory(plan, in);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->state.params, (prefetch + 1) * 4096) << prefetch;
    EXPECT_EQ(p->nvme, 2 * 4096) << prefetch;
    EXPECT_EQ(p->state.offloaded, 2 * 4096) << prefetch;
    EXPECT_EQ(p->state.optimizer, 12 * (4 + 2)) << prefetch;
  }
  in.offload_prefetch = 65;
  EXPECT_FALSE(PredictMemory(plan, in).ok());
}

TEST(TrafficModelTest, DesignTableVolumes) {
  const int64_t psi = 1'000'000;
  TrafficInputs in;
  in.compute_dtype = in.reduce_dtype = DType::kBf16;
  for (int stage = 0; stage <= 3; ++stage) {
    in.stage = stage;
    const TrafficPrediction t = PredictTrafficFromParams(psi, 4, in);
    const int64_t moved =
        t.of(Collective::kAllGather).bytes + t.of(Collective::kReduceScatter).bytes +
        (t.of(Collective::kAllReduce).bytes - (stage > 0 ? 8 : 0)) * (stage == 0 ? 2 : 1);
    EXPECT_EQ(moved, (stage == 3 ? 3 : 2) * 2 * psi) << stage;
  }
  in.stage = 3;
  const TrafficPrediction t = PredictTrafficFromParams(psi, 4, in);
  EXPECT_EQ(t.of(Collective::kAllGather).wire_bytes, 2 * 2 * psi * 3 / 4);
  EXPECT_NEAR(t.seconds(1e9), t.wire_bytes() / 1e9, 1e-12);
}

// A GPT-like order over units 0 (embed), 1, 2: forward 0 1 2 0, backward
// 0 2 1 0, prefetch 1, the step after the first (the order is recorded).
// Stage 3 gathers, by hand: F0 gathers 0 and prefetches 1; F1 prefetches 2;
// F2 prefetches 0; F0 (head) finds 0 gathered and keeps it, as B0 is next;
// B0 prefetches 2; B2 prefetches 1; B1 prefetches 0; B0 nothing. Gathers:
// 0,1,2,0,2,1,0 = 7, three of unit 0 (8 elements), four of 4. With two
// micro-batches the second F0 finds the first's last B0 kept: 13.
// Prefetch 0 gathers at every open but the kept-nothing case: 8.
TEST(TrafficModelTest, StageThreePrefetchSchedule) {
  auto plan = MakeShardPlan({{"e", {{"we", {8}, DType::kFp32}}},
                             {"b1", {{"w1", {4}, DType::kFp32}}},
                             {"b2", {{"w2", {4}, DType::kFp32}}}},
                            2, 1);
  ASSERT_TRUE(plan.ok());
  TrafficInputs in;
  in.stage = 3;
  for (int u : {0, 1, 2, 0}) in.brackets.push_back({u, false});
  for (int u : {0, 2, 1, 0}) in.brackets.push_back({u, true});
  auto t = PredictTraffic(*plan, in);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->of(Collective::kAllGather).calls, 7);
  EXPECT_EQ(t->of(Collective::kAllGather).bytes, 4 * (3 * 8 + 4 * 4));
  EXPECT_EQ(t->of(Collective::kReduceScatter).calls, 4);
  EXPECT_EQ(t->of(Collective::kAllReduce).bytes, 8);
  in.micro_batches = 2;
  t = PredictTraffic(*plan, in);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->of(Collective::kAllGather).calls, 13);
  EXPECT_EQ(t->of(Collective::kReduceScatter).calls, 8);
  in.micro_batches = 1;
  in.prefetch = 0;
  t = PredictTraffic(*plan, in);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->of(Collective::kAllGather).calls, 8);
  in.prefetch = 65;
  EXPECT_FALSE(PredictTraffic(*plan, in).ok());
}

TEST(RunPlanTest, RecommendsLowestStageThatFits) {
  PlanModel model;
  model.params = 1'000'000'000;  // fp32: 16 GB at stage 0.
  PlanMachine m;
  m.workers = 4;
  m.cuda = true;
  m.device_memory =
      8'000'000'000;  // Stage 0 (16 GB) and 1 (11 GB) do not fit; 2 (8 + 1 + 3 = 7 GB) does.
  auto plan = MakeRunPlan(model, m);
  ASSERT_TRUE(plan.ok());
  ASSERT_GE(plan->recommended, 0);
  const PlanChoice& c = plan->choices[plan->recommended];
  EXPECT_EQ(c.stage, 2);
  EXPECT_EQ(c.offload, OptimizerOffload::kNone);
  EXPECT_NE(plan->reason.find("stage 1 does not"), std::string::npos) << plan->reason;
  m.device_memory = 2'500'000'000;  // Only stage 3 with host offload fits: 1 + 1 GB.
  plan = MakeRunPlan(model, m);
  ASSERT_TRUE(plan.ok());
  ASSERT_GE(plan->recommended, 0);
  EXPECT_EQ(plan->choices[plan->recommended].offload, OptimizerOffload::kHost);
  EXPECT_EQ(plan->choices[plan->recommended].stage, 3);
  m.device_memory = 100;
  plan = MakeRunPlan(model, m);
  EXPECT_EQ(plan->recommended, -1);
}

}  // namespace
}  // namespace zeroshard
