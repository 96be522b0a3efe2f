// Live resharding (worker/trainer/live_reshard.h): engines trained at one
// world size hand their state to engines of another, over Gloo on loopback.
// The reference is the old engines' own snapshots laid end to end (the
// whole state as the old plan holds it): after the move every new rank's
// optimizer range must equal that reference bit for bit (padding zero),
// the optimizer step must carry over, and training on must equal training
// on with the state restored by hand. The decision rules are tested apart.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_runner.h"
#include "worker/trainer/live_reshard.h"

namespace zeroshard::testing {
namespace {

const MlpDims kDims{5, 9};

void Train(ShardedEngine& engine, const ShardPlan& plan, int rank, int n, int first, int count) {
  for (int step = first; step < first + count; ++step) {
    std::vector<Sample> batch;
    const int per = 12 / n;
    for (int k = 0; k < per; ++k) batch.push_back(MakeSample(kDims, step, rank * per + k));
    MlpForwardBackward(kDims, plan, engine, batch);
    ASSERT_TRUE(engine.Step(1.0f / per).ok());
  }
}

absl::StatusOr<std::unique_ptr<ShardedEngine>> Engine(Communicator* comm, int stage,
                                                      uint32_t seed) {
  ZS_ASSIGN_OR_RETURN(ShardPlan plan, MakeShardPlan(MlpUnits(kDims), comm->world_size(), 2));
  RunConfig config;
  config.stage = stage;
  return ShardedEngine::Create(plan, comm, MakeEngineOptions(config, RefAdamW{}),
                               MlpInit(plan, seed));
}

// The whole state per unit (master, m, v over numel) from old snapshots.
struct Full {
  std::vector<std::vector<float>> master, m, v;
};
Full Assemble(const std::vector<HeldState>& held, const ShardPlan& old_plan) {
  Full f;
  for (const UnitPlan& u : old_plan.units) {
    f.master.emplace_back(u.padded_numel, 0.0f);
    f.m.emplace_back(u.padded_numel, 0.0f);
    f.v.emplace_back(u.padded_numel, 0.0f);
  }
  for (const HeldState& h : held) {
    for (size_t u = 0; u < h.units.size(); ++u) {
      const HeldUnit& x = h.units[u];
      std::memcpy(f.master[u].data() + x.range.offset, x.master.data(), x.range.length * 4);
      std::memcpy(f.m[u].data() + x.range.offset, x.m.data(), x.range.length * 4);
      std::memcpy(f.v[u].data() + x.range.offset, x.v.data(), x.range.length * 4);
    }
  }
  return f;
}

void ExpectMatches(const Full& want, ShardedEngine& engine, const std::string& what) {
  for (size_t u = 0; u < engine.plan().units.size(); ++u) {
    const ElementRange r = engine.OptimizerShard(static_cast<int>(u)).range;
    std::vector<float> master(r.length), m(r.length), v(r.length);
    ASSERT_TRUE(engine.CopyOptimizerState(static_cast<int>(u), r, master.data(), m.data(),
                                          v.data()).ok());
    const int64_t numel = engine.plan().units[u].numel;
    for (int64_t i = 0; i < r.length; ++i) {
      const int64_t e = r.offset + i;
      const float wm = e < numel ? want.master[u][e] : 0.0f;
      const float wmo = e < numel ? want.m[u][e] : 0.0f;
      const float wv = e < numel ? want.v[u][e] : 0.0f;
      ASSERT_TRUE(master[i] == wm && m[i] == wmo && v[i] == wv)
          << what << " unit " << u << " element " << e;
    }
  }
}

struct Case {
  int stage, old_n, new_n;
};

TEST(LiveReshardTest, StateMovesBitExactlyBetweenWorldSizes) {
  for (const Case c : {Case{1, 2, 4}, Case{2, 2, 3}, Case{3, 3, 4}, Case{3, 2, 2}, Case{0, 2, 3},
                       Case{3, 4, 3}, Case{2, 3, 1}, Case{0, 3, 2}}) {
    const std::string what = absl::StrCat("stage ", c.stage, " N ", c.old_n, "->", c.new_n);
    std::vector<HeldState> held(c.old_n);
    ASSERT_TRUE(RunRanksAsThreads(c.old_n, "old" + what, [&](int r, Communicator* comm) {
                  ZS_ASSIGN_OR_RETURN(auto engine, Engine(comm, c.stage, 42));
                  Train(*engine, engine->plan(), r, c.old_n, 0, 3);
                  ZS_ASSIGN_OR_RETURN(held[r], SnapshotState(*engine, 7, 3));
                  return absl::OkStatus();
                }).ok()) << what;
    const ShardPlan old_plan = *MakeShardPlan(MlpUnits(kDims), c.old_n, 2);
    const Full want = Assemble(held, old_plan);
    // Scale-down keeps enough holders only when the new world is the old one
    // minus ranks that handed off; here, holders sit at reversed ranks and
    // any extra rank holds nothing.
    const int holders = std::min(c.old_n, c.new_n);
    const bool expect_live = holders == c.old_n || c.stage == 0;
    ASSERT_TRUE(RunRanksAsThreads(c.new_n, "new" + what, [&](int r, Communicator* comm) {
                  const int old_index = holders - 1 - r;
                  const absl::Span<const HeldState> mine =
                      old_index >= 0 ? absl::MakeConstSpan(&held[old_index], 1)
                                     : absl::Span<const HeldState>();
                  ZS_ASSIGN_OR_RETURN(const LiveState live,
                                      AgreeOnLiveState(*comm, mine, c.stage, absl::Seconds(20)));
                  EXPECT_EQ(live.live, expect_live) << what << ": " << live.why_not;
                  if (!live.live) return absl::OkStatus();
                  EXPECT_EQ(live.step, 3);
                  ZS_ASSIGN_OR_RETURN(auto engine, Engine(comm, c.stage, 1));
                  ZS_RETURN_IF_ERROR(
                      ReshardInto(*comm, live, mine, MlpUnits(kDims), *engine, absl::Seconds(20)));
                  EXPECT_EQ(engine->optimizer_step(), held[0].optimizer_step) << what;
                  ExpectMatches(want, *engine, absl::StrCat(what, " rank ", r));
                  Train(*engine, engine->plan(), r, c.new_n, 3, 2);  // Trains on.
                  return engine->status();
                }).ok()) << what;
  }
}

std::vector<int64_t> Row(const HeldState& h) { return DescribeHeld(absl::MakeConstSpan(&h, 1)); }
std::vector<int64_t> Rows(const HeldState& own, const HeldState& replica) {
  const HeldState both[] = {own, replica};
  return DescribeHeld(both);
}

// Peer redundancy: old rank 1 of 3 is lost, but old rank 0 kept its copy;
// the two survivors reshard onto a plan of 2, bit-exactly.
TEST(LiveReshardTest, ANeighboursCopyStandsInForALostRank) {
  const int stage = 3;
  std::vector<HeldState> held(3);
  ASSERT_TRUE(RunRanksAsThreads(3, "replica_old", [&](int r, Communicator* comm) {
                ZS_ASSIGN_OR_RETURN(auto engine, Engine(comm, stage, 42));
                Train(*engine, engine->plan(), r, 3, 0, 2);
                ZS_ASSIGN_OR_RETURN(held[r], SnapshotState(*engine, 9, 2));
                return absl::OkStatus();
              }).ok());
  const Full want = Assemble(held, *MakeShardPlan(MlpUnits(kDims), 3, 2));
  const std::vector<std::vector<HeldState>> survivors = {{held[0], held[1]}, {held[2]}};
  ASSERT_TRUE(RunRanksAsThreads(2, "replica_new", [&](int r, Communicator* comm) {
                ZS_ASSIGN_OR_RETURN(const LiveState live,
                                    AgreeOnLiveState(*comm, survivors[r], stage, absl::Seconds(20)));
                EXPECT_TRUE(live.live) << live.why_not;
                EXPECT_EQ(live.source, (std::vector<int>{0, 0, 1}));
                EXPECT_EQ(live.source_slot, (std::vector<int>{0, 1, 0}));
                ZS_ASSIGN_OR_RETURN(auto engine, Engine(comm, stage, 1));
                ZS_RETURN_IF_ERROR(ReshardInto(*comm, live, survivors[r], MlpUnits(kDims),
                                               *engine, absl::Seconds(20)));
                ExpectMatches(want, *engine, absl::StrCat("survivor ", r));
                return absl::OkStatus();
              }).ok());
}

TEST(LiveReshardTest, DecisionNamesWhatIsMissingOrInconsistent) {
  HeldState a;
  a.generation = 5;
  a.world_size = 2;
  a.stage = 3;
  a.step = 10;
  a.index = 0;
  HeldState b = a;
  b.index = 1;
  const std::vector<int64_t> none = DescribeHeld({});

  LiveState d = DecideLiveState({Row(b), none, Row(a)}, 3);
  ASSERT_TRUE(d.live) << d.why_not;
  EXPECT_EQ(d.source, (std::vector<int>{2, 0}));  // Old index -> current rank.
  EXPECT_EQ(d.step, 10);

  d = DecideLiveState({Row(a), none}, 3);  // Shard 1's holder died.
  EXPECT_FALSE(d.live);
  EXPECT_NE(d.why_not.find("shard 1"), std::string::npos) << d.why_not;

  HeldState late = b;
  late.step = 11;  // One rank finished a step the other did not.
  d = DecideLiveState({Row(a), Row(late)}, 3);
  EXPECT_FALSE(d.live);
  EXPECT_NE(d.why_not.find("at step 11 has no live holder"), std::string::npos) << d.why_not;

  // A copy refreshed at an older step does not mix with newer state, but an
  // older step every shard has is still live.
  HeldState a9 = a, b9 = b;
  a9.step = b9.step = 9;
  d = DecideLiveState({Rows(a, b9), Row(late)}, 3);
  EXPECT_FALSE(d.live) << "step 10 lacks shard 1 and step 11 shard 0";
  d = DecideLiveState({Rows(a, b), none}, 3);  // Rank 0 holds its neighbour's copy.
  ASSERT_TRUE(d.live) << d.why_not;
  EXPECT_EQ(d.source_slot, (std::vector<int>{0, 1}));
  d = DecideLiveState({Rows(a9, b9), Row(late)}, 3);
  ASSERT_TRUE(d.live) << d.why_not;
  EXPECT_EQ(d.step, 9);

  HeldState other = b;
  other.optimizer_step = 3;  // Same step, different optimizer step: corrupt.
  d = DecideLiveState({Row(a), Row(other)}, 3);
  EXPECT_FALSE(d.live);
  EXPECT_NE(d.why_not.find("disagree"), std::string::npos) << d.why_not;

  HeldState older = b;
  older.generation = 4;  // A stale holder from an earlier generation is ignored.
  d = DecideLiveState({Row(a), Row(older)}, 3);
  EXPECT_FALSE(d.live);

  d = DecideLiveState({Row(a), Row(b)}, 2);  // Stage changed.
  EXPECT_FALSE(d.live);
  EXPECT_NE(d.why_not.find("stage"), std::string::npos) << d.why_not;

  d = DecideLiveState({none, none}, 3);  // Nothing held: not live, nothing to say.
  EXPECT_FALSE(d.live);
  EXPECT_TRUE(d.why_not.empty());
}

}  // namespace
}  // namespace zeroshard::testing
