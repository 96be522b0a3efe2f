// GptModel with activation checkpointing through the sharded engine at
// stage 3, N = 2 ranks as threads over Gloo on loopback: the engine accepts
// the hook order (every Step succeeds, no bracket left open), the recompute
// costs no extra all-gather (kBlocks makes exactly kNone's gathers: the
// recompute uses the backward gather, [Note: activation checkpointing] in
// worker/model/gpt_model.h), and after a few AdamW steps every rank's final
// parameters equal kNone's bit for bit, with fp32 and with bf16 compute.
#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/model/model_config.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_runner.h"
#include "worker/model/gpt_model.h"
#include "worker/model/model_init.h"

namespace zeroshard {
namespace {

struct ModelRun {
  std::vector<std::vector<float>> params;  // Final full params per unit.
  int64_t gathers = 0;                     // All-gather calls over the run.
  int64_t gather_bytes = 0;
};

constexpr int kSteps = 3, kMicroBatches = 2, kMicro = 2;  // Sequences per micro-batch.

absl::StatusOr<ModelRun> TrainModelRank(const ModelConfig& c, ActivationCheckpointing mode,
                                        DType compute, Communicator* comm) {
  const int n = comm->world_size(), rank = comm->rank(), T = c.n_ctx;
  ZS_ASSIGN_OR_RETURN(ShardPlan plan, MakeShardPlan(ModelUnits(c), n, 2));
  testing::RunConfig rc;
  rc.stage = 3;
  rc.compute = compute;
  const EngineOptions options = testing::MakeEngineOptions(rc, testing::RefAdamW{});
  ZS_ASSIGN_OR_RETURN(std::unique_ptr<ShardedEngine> engine,
                      ShardedEngine::Create(plan, comm, options, InitUnits(c, 9)));
  GptModel model(c, mode);
  std::vector<int32_t> x(kMicro * T), y(kMicro * T);
  for (int step = 0; step < kSteps; ++step) {
    for (int mb = 0; mb < kMicroBatches; ++mb) {
      std::mt19937 rng(1000 * step + 10 * rank + mb);  // This rank's own data.
      for (int i = 0; i < kMicro * T; ++i) {
        x[i] = static_cast<int32_t>(rng() % 256);
        y[i] = static_cast<int32_t>(rng() % 256);
      }
      ZS_RETURN_IF_ERROR(
          model.ForwardBackward(x.data(), y.data(), kMicro, T, 1.0f / (kMicro * T), *engine)
              .status());
    }
    ZS_ASSIGN_OR_RETURN(StepResult result, engine->Step(1.0f / kMicroBatches));
    if (result.skipped) return absl::InternalError("step skipped");
  }
  ModelRun out;
  const CommStats stats = engine->comm_stats();
  out.gathers = stats.of(CommOp::kAllGather).calls;
  out.gather_bytes = stats.of(CommOp::kAllGather).bytes;
  for (int u = 0; u < static_cast<int>(plan.units.size()); ++u) {
    ZS_ASSIGN_OR_RETURN(std::vector<float> full, engine->GatherFullParams(u));
    out.params.push_back(std::move(full));
  }
  return out;
}

std::vector<ModelRun> TrainBothRanks(const ModelConfig& c, ActivationCheckpointing mode,
                                     DType compute, const std::string& prefix) {
  std::vector<ModelRun> runs(2);
  const absl::Status s =
      testing::RunRanksAsThreads(2, prefix, [&](int rank, Communicator* comm) -> absl::Status {
        ZS_ASSIGN_OR_RETURN(runs[rank], TrainModelRank(c, mode, compute, comm));
        return absl::OkStatus();
      });
  EXPECT_TRUE(s.ok()) << s;
  return runs;
}

void ExpectSameTraining(DType compute, const std::string& name) {
  const ModelConfig c = Gpt2Config(256, 3, 24, 3, 7);  // Odd shape: 3 layers, 3 heads, T = 7.
  const std::vector<ModelRun> none =
      TrainBothRanks(c, ActivationCheckpointing::kNone, compute, name + "_none");
  const std::vector<ModelRun> blocks =
      TrainBothRanks(c, ActivationCheckpointing::kBlocks, compute, name + "_blocks");
  const std::vector<std::vector<float>> init = InitUnits(c, 9);
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE(absl::StrCat("rank ", r));
    EXPECT_EQ(blocks[r].gathers, none[r].gathers);
    EXPECT_EQ(blocks[r].gather_bytes, none[r].gather_bytes);
    ASSERT_EQ(blocks[r].params.size(), init.size());
    ASSERT_EQ(none[r].params.size(), init.size());
    for (size_t u = 0; u < init.size(); ++u) {
      const std::vector<float>& a = none[r].params[u];
      const std::vector<float>& b = blocks[r].params[u];
      ASSERT_EQ(a.size(), b.size());
      EXPECT_NE(a, init[u]) << "unit " << u << " never moved: the test would prove nothing";
      for (size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0)
            << "unit " << u << " element " << i << ": " << a[i] << " vs " << b[i];
      }
    }
  }
}

TEST(EngineCheckpointingTest, Stage3N2Fp32BitEqual) { ExpectSameTraining(DType::kFp32, "ckpt32"); }

TEST(EngineCheckpointingTest, Stage3N2Bf16BitEqual) { ExpectSameTraining(DType::kBf16, "ckpt16"); }

}  // namespace
}  // namespace zeroshard
