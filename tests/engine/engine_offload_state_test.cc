// Offloaded optimizer state through the state paths: checkpoint save
// (CopyOptimizerState), the live-resharding snapshot and restore
// (SnapshotState / ReshardInto, which go through LoadShardState and
// RebuildComputeCopy), and export (GatherFullParams) give the same bits as
// the device store, both ways (an offloaded engine's snapshot restores into a
// resident one); the same with stage-3 parameter offload (--offload-params
// nvme), whose state paths rebuild the compute shards into the parameter
// store; and the NVMe store's resident optimizer bytes are its
// staging slots, independent of the model size:
//   resident = kStagingSlots (3) * 3 * AlignUp(4 * max_n, 4096) bytes,
//   offloaded = sum over units of 3 * AlignUp(4 * n_u, 4096) bytes,
// with n_u the unit's optimizer-range elements.
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_runner.h"
#include "worker/offload/block_file.h"
#include "worker/trainer/live_reshard.h"

namespace zeroshard::testing {
namespace {

const MlpDims kDims{5, 9};

absl::Status Train(ShardedEngine& engine, const ShardPlan& plan, int rank, int first, int count) {
  for (int step = first; step < first + count; ++step) {
    std::vector<Sample> batch;
    for (int k = 0; k < 3; ++k) batch.push_back(MakeSample(kDims, step, rank * 3 + k));
    MlpForwardBackward(kDims, plan, engine, batch);
    ZS_RETURN_IF_ERROR(engine.Step(1.0f / 3).status());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ShardedEngine>> Engine(Communicator* comm, int stage,
                                                      OffloadTarget target, bool params = false) {
  ZS_ASSIGN_OR_RETURN(ShardPlan plan, MakeShardPlan(MlpUnits(kDims), comm->world_size(), 2));
  RunConfig config;
  config.stage = stage;
  config.offload = {target, "/tmp", "", false};
  config.params_offload.enabled = params;
  config.params_offload.dir = "/tmp";
  return ShardedEngine::Create(plan, comm, MakeEngineOptions(config, RefAdamW{}), MlpInit(plan, 7));
}

bool SameHeld(const HeldState& a, const HeldState& b) {
  if (a.units.size() != b.units.size() || a.optimizer_step != b.optimizer_step) return false;
  for (size_t u = 0; u < a.units.size(); ++u) {
    const HeldUnit &x = a.units[u], &y = b.units[u];
    if (x.range.offset != y.range.offset || x.range.length != y.range.length) return false;
    for (auto [p, q] :
         {std::pair{&x.master, &y.master}, std::pair{&x.m, &y.m}, std::pair{&x.v, &y.v}}) {
      if (std::memcmp(p->data(), q->data(), p->size() * 4) != 0) return false;
    }
  }
  return true;
}

absl::Status ExpectSameParams(ShardedEngine& a, ShardedEngine& b, const std::string& what) {
  for (int u = 0; u < static_cast<int>(a.plan().units.size()); ++u) {
    ZS_ASSIGN_OR_RETURN(std::vector<float> x, a.GatherFullParams(u));
    ZS_ASSIGN_OR_RETURN(std::vector<float> y, b.GatherFullParams(u));
    EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * 4), 0) << what << " unit " << u;
  }
  return absl::OkStatus();
}

// Restores `held` into `into` by the live-resharding path (LoadShardState,
// RebuildComputeCopy).
absl::Status Restore(Communicator* comm, int stage, const HeldState& held, ShardedEngine& into) {
  ZS_ASSIGN_OR_RETURN(LiveState live,
                      AgreeOnLiveState(*comm, {&held, 1}, stage, absl::Seconds(20)));
  EXPECT_TRUE(live.live) << live.why_not;
  return ReshardInto(*comm, live, {&held, 1}, MlpUnits(kDims), into, absl::Seconds(20));
}

// One rank: device engine D and an offloaded engine O (optimizer state at
// `target`, compute shards in files with `params`) train side by side.
absl::Status StatePaths(int rank, Communicator* comm, int stage, OffloadTarget target,
                        bool params) {
  ZS_ASSIGN_OR_RETURN(auto d, Engine(comm, stage, OffloadTarget::kDevice));
  ZS_ASSIGN_OR_RETURN(auto o, Engine(comm, stage, target, params));
  ZS_RETURN_IF_ERROR(Train(*d, d->plan(), rank, 1, 4));
  ZS_RETURN_IF_ERROR(Train(*o, o->plan(), rank, 1, 4));
  ZS_ASSIGN_OR_RETURN(HeldState held_d, SnapshotState(*d, 1, 4));  // Checkpoint save's copy.
  ZS_ASSIGN_OR_RETURN(HeldState held_o, SnapshotState(*o, 1, 4));
  EXPECT_TRUE(SameHeld(held_d, held_o)) << "stage " << stage;
  ZS_RETURN_IF_ERROR(ExpectSameParams(*d, *o, absl::StrCat("export, stage ", stage)));
  // Restore the device engine's state into a fresh offloaded engine R by the
  // resharding path; D and R must then train on identically.
  ZS_ASSIGN_OR_RETURN(auto r, Engine(comm, stage, target, params));
  ZS_RETURN_IF_ERROR(Restore(comm, stage, held_d, *r));
  ZS_RETURN_IF_ERROR(Train(*d, d->plan(), rank, 5, 3));
  ZS_RETURN_IF_ERROR(Train(*r, r->plan(), rank, 5, 3));
  ZS_RETURN_IF_ERROR(ExpectSameParams(*d, *r, absl::StrCat("restore, stage ", stage)));
  // And back: O's snapshot restores into a fresh resident engine B, and O
  // and B train on identically.
  ZS_ASSIGN_OR_RETURN(auto b, Engine(comm, stage, OffloadTarget::kDevice));
  ZS_RETURN_IF_ERROR(Restore(comm, stage, held_o, *b));
  ZS_RETURN_IF_ERROR(Train(*o, o->plan(), rank, 5, 3));
  ZS_RETURN_IF_ERROR(Train(*b, b->plan(), rank, 5, 3));
  ZS_RETURN_IF_ERROR(ExpectSameParams(*o, *b, absl::StrCat("restore back, stage ", stage)));
  return ExpectSameParams(*d, *o, absl::StrCat("trained on, stage ", stage));
}

TEST(EngineOffloadStateTest, CheckpointReshardAndExportUnchanged) {
  for (OffloadTarget target : {OffloadTarget::kHost, OffloadTarget::kNvme}) {
    for (int stage = 0; stage <= 3; ++stage) {
      absl::Status s = RunRanksAsThreads(2, absl::StrCat("state", stage, static_cast<int>(target)),
                                         [&](int rank, Communicator* comm) {
                                           return StatePaths(rank, comm, stage, target, false);
                                         });
      ASSERT_TRUE(s.ok()) << s;
    }
  }
}

TEST(EngineOffloadStateTest, ParamOffloadCheckpointReshardAndExportUnchanged) {
  for (OffloadTarget target : {OffloadTarget::kDevice, OffloadTarget::kNvme}) {
    for (int n : {1, 3}) {
      absl::Status s = RunRanksAsThreads(
          n, absl::StrCat("param_state", n, static_cast<int>(target)),
          [&](int rank, Communicator* comm) { return StatePaths(rank, comm, 3, target, true); });
      ASSERT_TRUE(s.ok()) << "N=" << n << " optimizer " << static_cast<int>(target) << ": " << s;
    }
  }
}

// Twelve units of 20000 elements, N = 1, stage 1, synthetic gradients.
TEST(EngineOffloadStateTest, NvmeResidentOptimizerBytesAreTheStagingSlots) {
  constexpr int kUnits = 12;
  constexpr int64_t kNumel = 20000;
  std::vector<UnitSpec> specs;
  for (int u = 0; u < kUnits; ++u) {
    specs.push_back({absl::StrCat("u", u), {{absl::StrCat("w", u), {kNumel}, DType::kFp32}}});
  }
  ASSERT_TRUE(RunRanksAsThreads(1, "nvme_memory", [&](int, Communicator* comm) -> absl::Status {
                ZS_ASSIGN_OR_RETURN(ShardPlan plan, MakeShardPlan(specs, 1, 1));
                std::vector<std::vector<float>> init(kUnits, std::vector<float>(kNumel, 0.5f));
                RunConfig config;
                config.stage = 1;
                std::unique_ptr<ShardedEngine> engines[2];
                for (int k = 0; k < 2; ++k) {
                  config.offload = {k == 0 ? OffloadTarget::kDevice : OffloadTarget::kNvme, "/tmp",
                                    "", false};
                  ZS_ASSIGN_OR_RETURN(engines[k],
                                      ShardedEngine::Create(
                                          plan, comm, MakeEngineOptions(config, RefAdamW{}), init));
                }
                ShardedEngine& nvme = *engines[1];
                nvme.ResetPeakMemory();
                for (int step = 0; step < 3; ++step) {
                  for (auto& e : engines) {
                    for (int u = 0; u < kUnits; ++u) {
                      e->PreForward(u);
                      e->PostForward(u);
                      UnitBackwardView view = e->PreBackward(u);
                      for (int64_t i = 0; i < kNumel; ++i)
                        view.grads[i] += std::sin(0.01f * i + u + step);
                      e->PostBackward(u);
                    }
                    ZS_RETURN_IF_ERROR(e->Step().status());
                  }
                }
                const int64_t slots = kStagingSlots * 3 * AlignUp(4 * kNumel);
                // Resident under fp32 compute: m and v (the master is the compute copy).
                EXPECT_EQ(engines[0]->memory().optimizer, kUnits * 8 * kNumel);
                EXPECT_EQ(nvme.memory().optimizer, slots);
                EXPECT_EQ(nvme.peak_memory().optimizer, slots);
                EXPECT_LT(slots, kUnits * 12 * kNumel);  // The bound is below the state itself.
                EXPECT_EQ(nvme.memory().offloaded, kUnits * 3 * AlignUp(4 * kNumel));
                EXPECT_EQ(engines[0]->memory().offloaded, 0);
                return ExpectSameParams(*engines[0], nvme, "synthetic");
              }).ok());
}

}  // namespace
}  // namespace zeroshard::testing
