// Live resharding (worker/trainer/live_reshard.h): engines trained at one
// world size hand their state to engines of another, over Gloo on loopback.
// The reference is the old engines' own snapshots laid end to end (the
// whole state as the old plan holds it): after the move every new rank's
// optimizer range must equal that reference bit for bit (padding zero),
// the optimizer step must carry over, and training on must equal training
// on with the state restored by hand. The decision rules are tested apart.
#include "worker/trainer/live_reshard.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "tests/trainer/held_state_testing.h"

namespace zeroshard::testing {
namespace {

struct Case {
  int stage, old_n, new_n;
};

TEST(LiveReshardTest, StateMovesBitExactlyBetweenWorldSizes) {
  for (const Case c : {Case{1, 2, 4}, Case{2, 2, 3}, Case{3, 3, 4}, Case{3, 2, 2}, Case{0, 2, 3},
                       Case{3, 4, 3}, Case{2, 3, 1}, Case{0, 3, 2}}) {
    const std::string what = absl::StrCat("stage ", c.stage, " N ", c.old_n, "->", c.new_n);
    std::vector<HeldState> held(c.old_n);
    ASSERT_TRUE(RunRanksAsThreads(c.old_n, "old" + what,
                                  [&](int r, Communicator* comm) {
                                    ZS_ASSIGN_OR_RETURN(auto engine,
                                                        HeldTestEngine(comm, c.stage, 42));
                                    TrainSteps(*engine, r, c.old_n, 0, 3);
                                    ZS_ASSIGN_OR_RETURN(held[r], SnapshotState(*engine, 7, 3));
                                    return absl::OkStatus();
                                  })
                    .ok())
        << what;
    const ShardPlan old_plan = *MakeShardPlan(MlpUnits(kHeldDims), c.old_n, 2);
    const FullState want = AssembleState(held, old_plan);
    // Scale-down keeps enough holders only when the new world is the old one
    // minus ranks that handed off; here, holders sit at reversed ranks and
    // any extra rank holds nothing.
    const int holders = std::min(c.old_n, c.new_n);
    const bool expect_live = holders == c.old_n || c.stage == 0;
    ASSERT_TRUE(
        RunRanksAsThreads(c.new_n, "new" + what,
                          [&](int r, Communicator* comm) {
                            const int old_index = holders - 1 - r;
                            const absl::Span<const HeldState> mine =
                                old_index >= 0 ? absl::MakeConstSpan(&held[old_index], 1)
                                               : absl::Span<const HeldState>();
                            ZS_ASSIGN_OR_RETURN(
                                const LiveState live,
                                AgreeOnLiveState(*comm, mine, c.stage, absl::Seconds(20)));
                            EXPECT_EQ(live.live, expect_live) << what << ": " << live.why_not;
                            if (!live.live) return absl::OkStatus();
                            EXPECT_EQ(live.step, 3);
                            ZS_ASSIGN_OR_RETURN(auto engine, HeldTestEngine(comm, c.stage, 1));
                            ZS_RETURN_IF_ERROR(ReshardInto(*comm, live, mine, MlpUnits(kHeldDims),
                                                           *engine, absl::Seconds(20)));
                            EXPECT_EQ(engine->optimizer_step(), held[0].optimizer_step) << what;
                            ExpectStateMatches(want, *engine, absl::StrCat(what, " rank ", r));
                            TrainSteps(*engine, r, c.new_n, 3, 2);  // Trains on.
                            return engine->status();
                          })
            .ok())
        << what;
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
                ZS_ASSIGN_OR_RETURN(auto engine, HeldTestEngine(comm, stage, 42));
                TrainSteps(*engine, r, 3, 0, 2);
                ZS_ASSIGN_OR_RETURN(held[r], SnapshotState(*engine, 9, 2));
                return absl::OkStatus();
              }).ok());
  const FullState want = AssembleState(held, *MakeShardPlan(MlpUnits(kHeldDims), 3, 2));
  const std::vector<std::vector<HeldState>> survivors = {{held[0], held[1]}, {held[2]}};
  ASSERT_TRUE(RunRanksAsThreads(2, "replica_new", [&](int r, Communicator* comm) {
                ZS_ASSIGN_OR_RETURN(
                    const LiveState live,
                    AgreeOnLiveState(*comm, survivors[r], stage, absl::Seconds(20)));
                EXPECT_TRUE(live.live) << live.why_not;
                EXPECT_EQ(live.source, (std::vector<int>{0, 0, 1}));
                EXPECT_EQ(live.source_slot, (std::vector<int>{0, 1, 0}));
                ZS_ASSIGN_OR_RETURN(auto engine, HeldTestEngine(comm, stage, 1));
                ZS_RETURN_IF_ERROR(ReshardInto(*comm, live, survivors[r], MlpUnits(kHeldDims),
                                               *engine, absl::Seconds(20)));
                ExpectStateMatches(want, *engine, absl::StrCat("survivor ", r));
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
  older.generation = 4;  // Another generation's holder does not complete this one.
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
