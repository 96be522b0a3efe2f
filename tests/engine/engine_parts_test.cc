// The engine's parts by role, each without a model or a ShardedEngine, at
// N = 2 (two ranks as threads over Gloo): the gather scheduler's window and
// contents, the gradient reducer's sums (in the backward, in buckets, at
// the step), and the shard updater's norm and AdamW step against values
// worked out here.
#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "tests/engine/engine_parts_rig.h"
#include "tests/engine/engine_runner.h"
#include "worker/engine/gather_scheduler.h"
#include "worker/engine/gradient_reducer.h"
#include "worker/engine/shard_updater.h"
#include "worker/offload/optimizer_store.h"

namespace zeroshard::testing {
namespace {

constexpr int kRanks = 2;

// Rank r's value for element i of unit u: distinct across ranks and units.
float Value(int rank, int u, int64_t i) { return 100.0f * (rank + 1) + 10.0f * u + i; }

int GatheredUnits(const std::vector<EngineUnit>& units) {
  int n = 0;
  for (const EngineUnit& unit : units) n += unit.gathered.allocated() ? 1 : 0;
  return n;
}

TEST(GatherSchedulerTest, GathersEveryRanksShardAndKeepsTheWindowBounded) {
  ASSERT_TRUE(RunRanksAsThreads(kRanks, "parts-gather", [](int rank, Communicator* comm) {
                PartsRig rig({8, 8, 8, 8, 8, 8}, /*stage=*/3, comm, 0, /*prefetch=*/1);
                for (int u = 0; u < 6; ++u) {
                  float* shard = rig.units[u].params.as<float>();
                  for (int64_t i = 0; i < 4; ++i) shard[i] = Value(rank, u, i);
                }
                GatherScheduler gathers(rig.ctx, nullptr);
                for (int u = 0; u < 6; ++u) {  // A forward pass: units open in order.
                  rig.units[u].param_refs = 1;
                  const float* full = static_cast<const float*>(gathers.Open(u));
                  for (int r = 0; r < kRanks; ++r) {
                    for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(full[r * 4 + i], Value(r, u, i));
                  }
                  // The open unit and the next bucket, at most (1 + prefetch) + open.
                  EXPECT_LE(GatheredUnits(rig.units), 3) << "unit " << u;
                  if (u + 1 < 6) {
                    EXPECT_TRUE(rig.units[u + 1].gathered.allocated());
                  }
                  rig.units[u].param_refs = 0;
                  gathers.Close(u);
                }
                gathers.FreeAll();
                EXPECT_EQ(GatheredUnits(rig.units), 0);
                EXPECT_TRUE(gathers.EndStep().ok());
                return rig.tracker.status();
              }).ok());
}

// Fills unit u's bracket gradient on `rank` and closes it.
void Backward(PartsRig& rig, GradientReducer& reducer, int rank, int u) {
  float* g = reducer.Open(u);
  for (int64_t i = 0; i < rig.units[u].plan->padded_numel; ++i) g[i] += Value(rank, u, i);
  reducer.Close(u);
}

// Rank `rank`'s reduced shard of unit u equals the ranks' sum, `times` over.
void ExpectSummedShard(const PartsRig& rig, int rank, int u, const float* shard, int times) {
  const int64_t S = rig.units[u].plan->shard_numel;
  for (int64_t i = 0; i < S; ++i) {
    float want = 0;
    for (int r = 0; r < kRanks; ++r) want += Value(r, u, rank * S + i);
    EXPECT_EQ(shard[i], times * want) << "unit " << u << " element " << i;
  }
}

TEST(GradientReducerTest, ReduceScattersInTheBackwardWithAndWithoutBuckets) {
  for (int64_t bucket : {int64_t{0}, int64_t{1} << 20}) {
    ASSERT_TRUE(RunRanksAsThreads(kRanks, "parts-reduce-" + std::to_string(bucket),
                                  [bucket](int rank, Communicator* comm) {
                                    PartsRig rig({6, 10, 4}, /*stage=*/2, comm, bucket);
                                    GradientReducer reducer(rig.ctx);
                                    for (int u = 2; u >= 0; --u) Backward(rig, reducer, rank, u);
                                    Backward(rig, reducer, rank, 1);  // A second bracket adds.
                                    reducer.Flush();
                                    EXPECT_TRUE(reducer.ReduceAtStep().ok());
                                    for (int u = 0; u < 3; ++u) {
                                      const float* shard = static_cast<const float*>(
                                          reducer.ShardGrad(rig.units[u]));
                                      ExpectSummedShard(rig, rank, u, shard, u == 1 ? 2 : 1);
                                    }
                                    reducer.Zero();
                                    EXPECT_TRUE(rig.units[0].grads_zero);
                                    return rig.tracker.status();
                                  })
                    .ok());
  }
}

TEST(GradientReducerTest, StageZeroAllReducesAtTheStep) {
  ASSERT_TRUE(RunRanksAsThreads(kRanks, "parts-allreduce", [](int rank, Communicator* comm) {
                // Each rank adds its own values; the all-reduce sums both.
                PartsRig rig({6, 4}, /*stage=*/0, comm);
                GradientReducer reducer(rig.ctx);
                for (int u = 1; u >= 0; --u) Backward(rig, reducer, rank, u);
                reducer.Flush();
                EXPECT_TRUE(reducer.ReduceAtStep().ok());
                for (int u = 0; u < 2; ++u) {
                  const float* all = static_cast<const float*>(reducer.ShardGrad(rig.units[u]));
                  for (int64_t i = 0; i < rig.units[u].plan->padded_numel; ++i) {
                    EXPECT_EQ(all[i], Value(0, u, i) + Value(1, u, i));
                  }
                }
                return rig.tracker.status();
              }).ok());
}

// Stages 0-1 overlapped: in a sync micro-batch each unit's reduction
// (stage 0 all-reduce, stage 1 reduce-scatter) goes out as its last bracket
// closes. Unit 0 is tied (two brackets). The first step has no closes to
// learn from: everything is reduced at the step. The second has learnt
// them: unit 0 goes once, after its second bracket, and the step has
// nothing left to send. A third step whose pattern changed (unit 0 once
// more) reduces that bracket apart. Every sum is right.
void ExpectOverlappedReductions(int stage, int rank, Communicator* comm) {
  PartsRig rig({6, 4}, stage, comm);
  GradientReducer reducer(rig.ctx);
  reducer.set_sync(true);
  const CommOp op = stage == 0 ? CommOp::kAllReduce : CommOp::kReduceScatter;
  const std::vector<std::vector<int>> backward = {{0, 1, 0}, {0, 1, 0}, {0, 1, 0, 0}};
  const int64_t early[] = {0, 2, 3};  // Reductions sent by the backward.
  for (int step = 0; step < 3; ++step) {
    const int64_t before = comm->stats().of(op).calls;
    for (int u : backward[step]) Backward(rig, reducer, rank, u);
    reducer.Flush();  // Completes what the backward sent.
    EXPECT_EQ(comm->stats().of(op).calls - before, early[step]) << "step " << step;
    EXPECT_TRUE(reducer.ReduceAtStep().ok());
    EXPECT_EQ(comm->stats().of(op).calls - before, step == 0 ? 2 : early[step]) << "step " << step;
    for (int u = 0; u < 2; ++u) {
      const int times = u == 0 ? static_cast<int>(backward[step].size()) - 1 : 1;
      const float* reduced = static_cast<const float*>(reducer.ShardGrad(rig.units[u]));
      if (stage == 1) {
        ExpectSummedShard(rig, rank, u, reduced, times);
        continue;
      }
      for (int64_t i = 0; i < rig.units[u].plan->padded_numel; ++i) {
        EXPECT_EQ(reduced[i], times * (Value(0, u, i) + Value(1, u, i)));
      }
    }
    reducer.Zero();
  }
  EXPECT_TRUE(rig.tracker.status().ok()) << rig.tracker.status();
}

TEST(GradientReducerTest, StagesZeroAndOneReduceAsTheBackwardEnds) {
  for (int stage : {0, 1}) {
    ASSERT_TRUE(RunRanksAsThreads(kRanks, "parts-overlap-" + std::to_string(stage),
                                  [stage](int rank, Communicator* comm) {
                                    ExpectOverlappedReductions(stage, rank, comm);
                                    return absl::OkStatus();
                                  })
                    .ok());
  }
}

// Stage 1: the norm of the summed gradient over both ranks' shards, and one
// AdamW step (weight decay 0: w - lr * g / (|g| + eps) at step 1) whose new
// compute copy is all-gathered into every rank's full buffer.
TEST(ShardUpdaterTest, NormAndOneAdamWStepMatchTheHandWorkedValues) {
  ASSERT_TRUE(RunRanksAsThreads(kRanks, "parts-update", [](int, Communicator* comm) {
                PartsRig rig({6, 4}, /*stage=*/1, comm);
                rig.options.adamw = {.lr = 0.5f, .beta1 = 0.9f, .beta2 = 0.99f, .eps = 1e-8f};
                std::vector<int64_t> sizes;
                for (const EngineUnit& unit : rig.units) sizes.push_back(unit.opt_range.length);
                auto store = CreateOptimizerStore({}, sizes, &rig.device, &rig.accountant);
                EXPECT_TRUE(store.ok());
                GradientReducer reducer(rig.ctx);
                double want_sq = 0;
                for (int u = 0; u < 2; ++u) {
                  EngineUnit& unit = rig.units[u];
                  std::vector<float> master(unit.opt_range.length, 1.0f);
                  EXPECT_TRUE((*store)->Load(u, master.data(), nullptr, nullptr).ok());
                  float* g = unit.grads.as<float>();  // Stage 1: the rank's slice is the sum.
                  for (int64_t i = 0; i < unit.plan->padded_numel; ++i) {
                    g[i] = (i % 2 == 0 ? 1.0f : -1.0f) * (u + 1);
                  }
                  want_sq += double(u + 1) * (u + 1) * unit.plan->padded_numel;
                }
                ShardUpdater updater(rig.ctx, comm, store->get(), nullptr, &reducer);
                absl::StatusOr<double> sq = updater.GlobalSumSquares();
                EXPECT_TRUE(sq.ok());
                if (sq.ok()) {
                  EXPECT_DOUBLE_EQ(*sq, want_sq);
                }
                EXPECT_TRUE(updater.Update(/*step=*/1, /*multiplier=*/1.0f).ok());
                EXPECT_TRUE(rig.tracker.AwaitInFlight().ok());
                for (const EngineUnit& unit : rig.units) {
                  const float* w = unit.params.as<float>();  // Full, after the all-gather.
                  for (int64_t i = 0; i < unit.plan->padded_numel; ++i) {
                    const float sign = i % 2 == 0 ? 1.0f : -1.0f;
                    EXPECT_NEAR(w[i], 1.0f - 0.5f * sign, 1e-6) << unit.plan->name << " " << i;
                  }
                }
                return rig.tracker.status();
              }).ok());
}

}  // namespace
}  // namespace zeroshard::testing
