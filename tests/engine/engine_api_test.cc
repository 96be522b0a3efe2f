// ShardedEngine's contract beyond parity: argument errors name the field;
// checkpoint state round-trips through OptimizerShard / LoadShardState
// (training continues bit-identically); a non-finite gradient skips the step;
// Step inside a bracket is refused; and a rank that never shows up makes the
// others' collectives time out (fault injection), with Step returning the
// error instead of hanging or crashing.
#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_runner.h"
#include "worker/device/cpu_device.h"

namespace zeroshard::testing {
namespace {

const MlpDims kDims{3, 7};

absl::StatusOr<std::unique_ptr<ShardedEngine>> MakeEngine(const ShardPlan& plan, Communicator* comm,
                                                          int stage) {
  RunConfig config;
  config.stage = stage;
  return ShardedEngine::Create(plan, comm, MakeEngineOptions(config, RefAdamW{}),
                               MlpInit(plan, 42));
}

void TrainSteps(ShardedEngine& engine, const ShardPlan& plan, int rank, int first, int count) {
  for (int step = first; step < first + count; ++step) {
    std::vector<Sample> batch;
    for (int k = 0; k < 3; ++k) batch.push_back(MakeSample(kDims, step, rank * 3 + k));
    MlpForwardBackward(kDims, plan, engine, batch);
    ASSERT_TRUE(engine.Step().ok());
  }
}

TEST(EngineApiTest, CreateRejectsBadArgumentsNamingTheField) {
  ASSERT_TRUE(RunRanksAsThreads(1, "api_args", [](int, Communicator* comm) {
                absl::StatusOr<ShardPlan> plan = MakeShardPlan(MlpUnits(kDims), 1, 1);
                auto expect_bad = [&](EngineOptions o, std::vector<std::vector<float>> init,
                                      const std::string& field) {
                  absl::StatusOr<std::unique_ptr<ShardedEngine>> e =
                      ShardedEngine::Create(*plan, comm, o, init);
                  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << field;
                  EXPECT_NE(e.status().message().find(field), std::string::npos) << e.status();
                };
                const std::vector<std::vector<float>> good = MlpInit(*plan, 1);
                EngineOptions o;
                o.stage = 4;
                expect_bad(o, good, "stage");
                o = {};
                o.compute_dtype = DType::kFp16;
                expect_bad(o, good, "compute_dtype");
                o = {};
                o.reduce_dtype = DType::kFp16;
                expect_bad(o, good, "reduce_dtype");
                o = {};
                o.adamw.beta2 = 1.0f;
                expect_bad(o, good, "adamw.beta2");
                o = {};
                o.collective_timeout = absl::ZeroDuration();
                expect_bad(o, good, "collective_timeout");
                o = {};
                o.reserved_bytes = -1;
                expect_bad(o, good, "reserved_bytes");
                std::vector<std::vector<float>> short_unit = good;
                short_unit[1].pop_back();
                expect_bad({}, short_unit, "initial_units[1]");
                absl::StatusOr<ShardPlan> plan2 = MakeShardPlan(MlpUnits(kDims), 2, 1);
                EXPECT_EQ(ShardedEngine::Create(*plan2, comm, {}, good).status().code(),
                          absl::StatusCode::kInvalidArgument);
                return absl::OkStatus();
              }).ok());
}

// The caller's reserve (activations, work buffers) counts in Create's fit
// check: a reserve beyond the device's free memory is refused, naming it;
// the same engine without the reserve is created. (1 GiB over, not 1 byte:
// the CPU device's free memory is the host's MemAvailable, which moves.)
TEST(EngineApiTest, ReservedBytesCountInTheFitCheck) {
  ASSERT_TRUE(RunRanksAsThreads(1, "api_reserve", [](int, Communicator* comm) {
                absl::StatusOr<ShardPlan> plan = MakeShardPlan(MlpUnits(kDims), 1, 1);
                CpuDevice device(1);
                absl::StatusOr<MemoryInfo> info = device.memory_info();
                if (!info.ok()) return info.status();
                EngineOptions o;
                o.device = &device;
                o.reserved_bytes = info->free_bytes + (int64_t{1} << 30);
                auto refused = ShardedEngine::Create(*plan, comm, o, MlpInit(*plan, 1));
                EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted)
                    << refused.status();
                EXPECT_NE(refused.status().message().find("activations and work buffers"),
                          std::string::npos)
                    << refused.status();
                o.reserved_bytes = 0;
                EXPECT_TRUE(ShardedEngine::Create(*plan, comm, o, MlpInit(*plan, 1)).ok());
                return absl::OkStatus();
              }).ok());
}

// Engine A trains 3 steps; engine B is created fresh, loads A's shard state
// and step count; both train 2 more identical steps: masters are bit-equal.
TEST(EngineApiTest, ShardStateRoundTripContinuesBitIdentically) {
  for (int stage : {1, 3}) {
    absl::Status s = RunRanksAsThreads(
        2, "api_roundtrip" + std::to_string(stage),
        [&](int rank, Communicator* comm) -> absl::Status {
          ZS_ASSIGN_OR_RETURN(ShardPlan plan, MakeShardPlan(MlpUnits(kDims), 2, 2));
          ZS_ASSIGN_OR_RETURN(auto a, MakeEngine(plan, comm, stage));
          ZS_ASSIGN_OR_RETURN(auto b, MakeEngine(plan, comm, stage));
          TrainSteps(*a, plan, rank, 1, 3);
          for (int u = 0; u < 3; ++u) {
            const OptimizerShardView view = a->OptimizerShard(u);
            const size_t n = static_cast<size_t>(view.range.length);
            EXPECT_EQ(view.range, plan.units[u].shard(rank));
            ZS_RETURN_IF_ERROR(b->LoadShardState(u, {view.master, n}, {view.m, n}, {view.v, n}));
            EXPECT_EQ(b->LoadShardState(u, {view.master, n - 1}, {view.m, n}, {view.v, n}).code(),
                      absl::StatusCode::kInvalidArgument);
          }
          EXPECT_EQ(b->Step().status().code(), absl::StatusCode::kFailedPrecondition);
          b->set_optimizer_step(a->optimizer_step());
          ZS_RETURN_IF_ERROR(b->RebuildComputeCopy());
          TrainSteps(*a, plan, rank, 4, 2);
          TrainSteps(*b, plan, rank, 4, 2);
          for (int u = 0; u < 3; ++u) {
            ZS_ASSIGN_OR_RETURN(std::vector<float> pa, a->GatherFullParams(u));
            ZS_ASSIGN_OR_RETURN(std::vector<float> pb, b->GatherFullParams(u));
            EXPECT_EQ(std::memcmp(pa.data(), pb.data(), pa.size() * 4), 0) << "unit " << u;
          }
          return absl::OkStatus();
        });
    EXPECT_TRUE(s.ok()) << "stage " << stage << ": " << s;
  }
}

// The model-weight load's in-place path (worker/trainer/checkpointing.cc):
// engine B's master written through HostMaster and loaded with empty m and
// v trains bit-identically to engine C loaded from host arrays and zeros.
TEST(EngineApiTest, MasterWrittenInPlaceLoadsAsFromHostArrays) {
  absl::Status s =
      RunRanksAsThreads(2, "api_in_place", [&](int rank, Communicator* comm) -> absl::Status {
        ZS_ASSIGN_OR_RETURN(ShardPlan plan, MakeShardPlan(MlpUnits(kDims), 2, 2));
        ZS_ASSIGN_OR_RETURN(auto a, MakeEngine(plan, comm, 3));
        ZS_ASSIGN_OR_RETURN(auto b, MakeEngine(plan, comm, 3));
        ZS_ASSIGN_OR_RETURN(auto c, MakeEngine(plan, comm, 3));
        TrainSteps(*a, plan, rank, 1, 3);
        TrainSteps(*b, plan, rank, 1, 1);  // Non-zero m and v, which the load must clear.
        for (int u = 0; u < 3; ++u) {
          const OptimizerShardView view = a->OptimizerShard(u);
          const size_t n = static_cast<size_t>(view.range.length);
          float* in_place = b->HostMaster(u);
          EXPECT_NE(in_place, nullptr) << "the CPU device's resident state is host memory";
          if (in_place == nullptr) return absl::InternalError("no host master");
          std::memcpy(in_place, view.master, n * 4);
          EXPECT_EQ(b->LoadShardState(u, {in_place, n}, {view.m, n - 1}, {}).code(),
                    absl::StatusCode::kInvalidArgument)
              << "only an empty m or v means zeros";
          ZS_RETURN_IF_ERROR(b->LoadShardState(u, {in_place, n}, {}, {}));
          const std::vector<float> master(view.master, view.master + n), zeros(n, 0.0f);
          ZS_RETURN_IF_ERROR(c->LoadShardState(u, master, zeros, zeros));
          const OptimizerShardView loaded = b->OptimizerShard(u);
          EXPECT_TRUE(std::equal(loaded.m, loaded.m + n, zeros.begin())) << "unit " << u;
          EXPECT_TRUE(std::equal(loaded.v, loaded.v + n, zeros.begin())) << "unit " << u;
        }
        for (ShardedEngine* e : {b.get(), c.get()}) {
          e->set_optimizer_step(0);
          ZS_RETURN_IF_ERROR(e->RebuildComputeCopy());
          TrainSteps(*e, plan, rank, 4, 2);
        }
        for (int u = 0; u < 3; ++u) {
          ZS_ASSIGN_OR_RETURN(std::vector<float> pb, b->GatherFullParams(u));
          ZS_ASSIGN_OR_RETURN(std::vector<float> pc, c->GatherFullParams(u));
          EXPECT_EQ(std::memcmp(pb.data(), pc.data(), pb.size() * 4), 0) << "unit " << u;
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(EngineApiTest, NonFiniteGradientSkipsStepAndBracketedStepIsRefused) {
  ASSERT_TRUE(
      RunRanksAsThreads(2, "api_nonfinite", [](int rank, Communicator* comm) -> absl::Status {
        ZS_ASSIGN_OR_RETURN(ShardPlan plan, MakeShardPlan(MlpUnits(kDims), 2, 1));
        ZS_ASSIGN_OR_RETURN(auto engine, MakeEngine(plan, comm, 2));
        ZS_ASSIGN_OR_RETURN(std::vector<float> before, engine->GatherFullParams(1));
        UnitBackwardView v = engine->PreBackward(1);
        if (rank == 1) v.grads[3] = NAN;  // Only one rank: the norm all-reduce spreads it.
        engine->PostBackward(1);
        engine->PreForward(0);
        EXPECT_EQ(engine->Step().status().code(), absl::StatusCode::kFailedPrecondition);
        engine->PostForward(0);
        ZS_ASSIGN_OR_RETURN(StepResult r, engine->Step());
        EXPECT_TRUE(r.skipped);
        EXPECT_EQ(r.step, 0);
        ZS_ASSIGN_OR_RETURN(std::vector<float> after, engine->GatherFullParams(1));
        EXPECT_EQ(before, after);
        TrainSteps(*engine, plan, rank, 1, 1);  // Gradients were zeroed: trains normally.
        EXPECT_EQ(engine->optimizer_step(), 1);
        return absl::OkStatus();
      }).ok());
}

// Stages 2-3 only mark the shard gradients zero after a step (the next
// reduce-scatter overwrites them): a unit with a backward in step 1 and
// none in step 2 must count as zero in step 2's norm, as at stage 0, which
// zero-fills.
TEST(EngineApiTest, AUnitWithoutBackwardCountsZeroAtEveryStage) {
  std::vector<std::vector<double>> norms(4);
  for (int stage : {0, 2, 3}) {
    ASSERT_TRUE(RunRanksAsThreads(2, absl::StrCat("api_nobackward", stage),
                                  [&](int rank, Communicator* comm) -> absl::Status {
                                    ZS_ASSIGN_OR_RETURN(ShardPlan plan,
                                                        MakeShardPlan(MlpUnits(kDims), 2, 1));
                                    ZS_ASSIGN_OR_RETURN(auto engine, MakeEngine(plan, comm, stage));
                                    auto backward = [&](int u, float value) {
                                      UnitBackwardView v = engine->PreBackward(u);
                                      for (int64_t i = 0; i < plan.units[u].numel; ++i)
                                        v.grads[i] += value;
                                      engine->PostBackward(u);
                                    };
                                    for (int u = 0; u < 3; ++u) backward(u, 2.0f);
                                    ZS_ASSIGN_OR_RETURN(StepResult first, engine->Step());
                                    backward(1, 1.0f);  // Units 0 and 2 have no backward in step 2.
                                    ZS_ASSIGN_OR_RETURN(StepResult second, engine->Step());
                                    if (rank == 0)
                                      norms[stage] = {first.grad_norm, second.grad_norm};
                                    return absl::OkStatus();
                                  })
                    .ok());
  }
  ASSERT_EQ(norms[0].size(), 2u);
  for (int stage : {2, 3}) {
    ASSERT_EQ(norms[stage].size(), 2u);
    for (int s = 0; s < 2; ++s) {
      EXPECT_NEAR(norms[stage][s], norms[0][s], 1e-9 * norms[0][s])
          << "stage " << stage << " step " << s + 1;
    }
  }
  // Step 2's gradient is unit 1's ones alone (the mean over ranks).
  absl::StatusOr<ShardPlan> plan = MakeShardPlan(MlpUnits(kDims), 2, 1);
  ASSERT_TRUE(plan.ok());
  EXPECT_NEAR(norms[0][1], std::sqrt(static_cast<double>(plan->units[1].numel)), 1e-9);
}

// HostHooks (the bridge for a host model over device buffers) adds in fp32
// on the host exactly as the CPU device does: through it, every stage
// trains to the same bits as without it.
TEST(EngineApiTest, HostHooksAreBitIdenticalOnTheCpuDevice) {
  for (int stage = 0; stage <= 3; ++stage) {
    std::vector<RankResult> direct(2), bridged(2);
    ASSERT_TRUE(
        RunRanksAsThreads(2, absl::StrCat("hosthooks", stage), [&](int rank, Communicator* comm) {
          RunConfig config;
          config.stage = stage;
          config.steps = 3;
          ZS_ASSIGN_OR_RETURN(direct[rank], TrainRank(kDims, RefAdamW{}, config, comm));
          config.via_host_hooks = true;
          ZS_ASSIGN_OR_RETURN(bridged[rank], TrainRank(kDims, RefAdamW{}, config, comm));
          return absl::OkStatus();
        }).ok());
    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(direct[r].params, bridged[r].params) << "stage " << stage << " rank " << r;
      EXPECT_EQ(direct[r].grad_norms, bridged[r].grad_norms) << "stage " << stage;
    }
  }
}

// Rank 1 never takes part: rank 0's stage-3 gather must time out within the
// collective timeout; the hooks keep handing out buffers, Step returns the
// error, and nothing hangs.
TEST(EngineApiTest, AbsentPeerTimesOutAndStepReportsIt) {
  absl::Notification rank0_done;
  std::atomic<int64_t> elapsed_ms{0};
  absl::Status s =
      RunRanksAsThreads(2, "api_timeout", [&](int rank, Communicator* comm) -> absl::Status {
        ZS_ASSIGN_OR_RETURN(ShardPlan plan, MakeShardPlan(MlpUnits(kDims), 2, 1));
        if (rank == 1) {
          rank0_done.WaitForNotificationWithTimeout(absl::Seconds(30));
          return absl::OkStatus();
        }
        RunConfig config;
        config.stage = 3;
        EngineOptions o = MakeEngineOptions(config, RefAdamW{});
        o.collective_timeout = absl::Milliseconds(300);
        ZS_ASSIGN_OR_RETURN(auto engine, ShardedEngine::Create(plan, comm, o, MlpInit(plan, 42)));
        const absl::Time start = absl::Now();
        MlpForwardBackward(kDims, plan, *engine, {MakeSample(kDims, 1, 0)});
        absl::StatusOr<StepResult> r = engine->Step();
        elapsed_ms = absl::ToInt64Milliseconds(absl::Now() - start);
        EXPECT_FALSE(r.ok());
        EXPECT_FALSE(engine->status().ok());
        EXPECT_TRUE(r.status().code() == absl::StatusCode::kDeadlineExceeded ||
                    r.status().code() == absl::StatusCode::kUnavailable ||
                    r.status().code() == absl::StatusCode::kAborted)
            << r.status();
        engine.reset();
        rank0_done.Notify();
        return absl::OkStatus();
      });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_LT(elapsed_ms.load(), 5000) << "the first timeout must stop further waits";
}

}  // namespace
}  // namespace zeroshard::testing
