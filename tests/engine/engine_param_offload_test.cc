// Stage-3 parameter offload (--offload-params nvme, worker/offload/
// param_store.h) in the engine: the staging bound and the refusals (its
// bit-equality is ParamOffloadEquivalence in engine_offload_test.cc).
//
// Memory: with params offload the resident parameter bytes are exactly the
// staging slots, independent of the model size:
//   params = (prefetch + 1) * AlignUp(compute bytes * max shard elements, 4096)
// before, during and after steps (the peak too), and the offloaded figure
// is the files, sum over units of AlignUp(compute bytes * S_u, 4096).
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_runner.h"
#include "worker/offload/block_file.h"

namespace zeroshard::testing {
namespace {

const MlpDims kDims{3, 7};

// Twelve units of 20000 elements at N = 1 (shard = unit), stage 3, bf16
// compute, synthetic gradients; prefetch 0 and 2.
TEST(ParamOffloadState, ResidentParamBytesAreTheStagingSlots) {
  constexpr int kUnits = 12;
  constexpr int64_t kNumel = 20000, kBytes = 2 * kNumel;  // bf16.
  std::vector<UnitSpec> specs;
  for (int u = 0; u < kUnits; ++u) {
    specs.push_back({absl::StrCat("u", u), {{absl::StrCat("w", u), {kNumel}, DType::kFp32}}});
  }
  for (int prefetch : {0, 2}) {
    ASSERT_TRUE(
        RunRanksAsThreads(
            1, absl::StrCat("param_memory", prefetch),
            [&](int, Communicator* comm) -> absl::Status {
              ZS_ASSIGN_OR_RETURN(ShardPlan plan, MakeShardPlan(specs, 1, 1));
              std::vector<std::vector<float>> init(kUnits, std::vector<float>(kNumel, 0.5f));
              RunConfig config;
              config.stage = 3;
              config.compute = DType::kBf16;
              std::unique_ptr<ShardedEngine> engines[2];
              for (int k = 0; k < 2; ++k) {
                config.params_offload = {k == 1, "/tmp", "", false, prefetch};
                ZS_ASSIGN_OR_RETURN(
                    engines[k],
                    ShardedEngine::Create(plan, comm, MakeEngineOptions(config, RefAdamW{}), init));
              }
              ShardedEngine& offloaded = *engines[1];
              const int64_t slots = (prefetch + 1) * AlignUp(kBytes);
              EXPECT_EQ(offloaded.memory().params, slots) << "after Create";
              offloaded.ResetPeakMemory();
              for (int step = 0; step < 3; ++step) {
                for (auto& e : engines) {
                  for (int u = 0; u < kUnits; ++u) {
                    e->PreForward(u);
                    e->PostForward(u);
                  }
                  for (int u = kUnits - 1; u >= 0; --u) {
                    UnitBackwardView view = e->PreBackward(u);
                    for (int64_t i = 0; i < kNumel; ++i)
                      view.grads[i] += std::sin(0.01f * i + u + step);
                    e->PostBackward(u);
                  }
                  ZS_RETURN_IF_ERROR(e->Step().status());
                }
              }
              EXPECT_EQ(engines[0]->memory().params, kUnits * kBytes);
              EXPECT_EQ(offloaded.memory().params, slots) << "prefetch " << prefetch;
              EXPECT_EQ(offloaded.peak_memory().params, slots) << "prefetch " << prefetch;
              EXPECT_LT(slots, kUnits * kBytes);  // The bound is below the parameters themselves.
              EXPECT_EQ(offloaded.memory().offloaded, kUnits * AlignUp(kBytes));
              EXPECT_EQ(engines[0]->memory().offloaded, 0);
              for (int u = 0; u < kUnits; ++u) {
                ZS_ASSIGN_OR_RETURN(std::vector<float> x, engines[0]->GatherFullParams(u));
                ZS_ASSIGN_OR_RETURN(std::vector<float> y, offloaded.GatherFullParams(u));
                EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * 4), 0) << "unit " << u;
              }
              return absl::OkStatus();
            })
            .ok());
  }
}

TEST(ParamOffloadState, RefusedBelowStage3) {
  ASSERT_TRUE(RunRanksAsThreads(1, "param_refused", [&](int, Communicator* comm) -> absl::Status {
                ZS_ASSIGN_OR_RETURN(ShardPlan plan, MakeShardPlan(MlpUnits(kDims), 1, 2));
                RunConfig config;
                config.stage = 2;
                config.params_offload = {true, "/tmp", "", false, 2};
                auto e = ShardedEngine::Create(plan, comm, MakeEngineOptions(config, RefAdamW{}),
                                               MlpInit(plan, 1));
                EXPECT_TRUE(absl::IsInvalidArgument(e.status())) << e.status();
                EXPECT_NE(e.status().message().find("stage 3"), std::string::npos) << e.status();
                config.stage = 3;
                config.params_offload.dir = "/nonexistent/zs";
                e = ShardedEngine::Create(plan, comm, MakeEngineOptions(config, RefAdamW{}),
                                          MlpInit(plan, 1));
                EXPECT_TRUE(absl::IsFailedPrecondition(e.status())) << e.status();
                EXPECT_NE(e.status().message().find("/nonexistent/zs"), std::string::npos)
                    << e.status();
                return absl::OkStatus();
              }).ok());
}

}  // namespace
}  // namespace zeroshard::testing
