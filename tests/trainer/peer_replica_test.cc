// Peer redundancy's copies (worker/trainer/peer_replica.h), over Gloo on
// loopback with ranks as threads:
// - a refresh keeps this rank's state and its ring neighbour's, bit for bit
//   what their engines hold, and counts their bytes;
// - a refresh cut short by a lost rank (it never joins the refresh) leaves
//   the survivors holding every shard of the last refreshed step, and they
//   reshard live onto N - 1 ranks to exactly that state;
// - a rank lost before a generation's first refresh passes leaves the
//   survivors the state the generation started from (PeerReplica::Keep);
// - the decision over what a cut-short refresh leaves ([Note: a refresh cut
//   short]) picks the newest step every shard has.
#include "worker/trainer/peer_replica.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "tests/trainer/held_state_testing.h"

namespace zeroshard::testing {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(20);

TEST(PeerReplicaTest, KeepsTheOwnAndTheNeighboursState) {
  const int n = 3;
  std::vector<HeldState> own(n);
  std::vector<std::vector<HeldState>> taken(n);
  std::vector<int64_t> bytes(n);
  ASSERT_TRUE(RunRanksAsThreads(n, "replica_keep", [&](int r, Communicator* comm) {
                ZS_ASSIGN_OR_RETURN(auto engine, HeldTestEngine(comm, 3, 42));
                TrainSteps(*engine, r, n, 0, 2);
                PeerReplica replica;
                ZS_RETURN_IF_ERROR(replica.Refresh(*engine, *comm, 7, 2, kTimeout));
                ZS_ASSIGN_OR_RETURN(own[r], SnapshotState(*engine, 7, 2));
                bytes[r] = replica.bytes();
                taken[r] = replica.Take();
                EXPECT_EQ(replica.bytes(), 0);
                return absl::OkStatus();
              }).ok());
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(taken[r].size(), 2u) << "rank " << r;
    const bool own_first = taken[r][0].index == r;
    const HeldState& mine = taken[r][own_first ? 0 : 1];
    const HeldState& theirs = taken[r][own_first ? 1 : 0];
    EXPECT_EQ(mine.index, r);
    EXPECT_EQ(theirs.index, (r + 1) % n);
    int64_t elements = 0;
    for (const HeldState* h : {&mine, &theirs}) {
      const HeldState& want = own[h->index];
      EXPECT_EQ(h->step, 2);
      EXPECT_EQ(h->optimizer_step, want.optimizer_step);
      ASSERT_EQ(h->units.size(), want.units.size());
      for (size_t u = 0; u < want.units.size(); ++u) {
        EXPECT_EQ(h->units[u].range.offset, want.units[u].range.offset);
        EXPECT_EQ(h->units[u].master, want.units[u].master) << "rank " << r << " unit " << u;
        EXPECT_EQ(h->units[u].m, want.units[u].m);
        EXPECT_EQ(h->units[u].v, want.units[u].v);
        elements += static_cast<int64_t>(want.units[u].master.size());
      }
    }
    EXPECT_EQ(bytes[r], 12 * elements) << "rank " << r;
  }
}

// Rank 1 of 3 is lost before the refresh of step 3: its left neighbour
// (rank 0) never gets its shard of step 3, so the survivors go on from
// step 2, the last refresh every rank finished.
TEST(PeerReplicaTest, ARefreshCutShortLeavesAWholeStep) {
  for (const int stage : {1, 3}) {
    const std::string what = absl::StrCat("stage ", stage);
    const int n = 3, lost = 1;
    std::vector<HeldState> at2(n);
    std::vector<std::vector<HeldState>> held(n);
    ASSERT_TRUE(
        RunRanksAsThreads(n, "replica_cut" + what,
                          [&](int r, Communicator* comm) {
                            ZS_ASSIGN_OR_RETURN(auto engine, HeldTestEngine(comm, stage, 42));
                            TrainSteps(*engine, r, n, 0, 2);
                            PeerReplica replica;
                            ZS_RETURN_IF_ERROR(replica.Refresh(*engine, *comm, 7, 2, kTimeout));
                            ZS_ASSIGN_OR_RETURN(at2[r], SnapshotState(*engine, 7, 2));
                            TrainSteps(*engine, r, n, 2, 1);
                            if (r == lost) return absl::OkStatus();  // Gone before the refresh.
                            const absl::Status s =
                                replica.Refresh(*engine, *comm, 7, 3, absl::Seconds(2));
                            EXPECT_FALSE(s.ok()) << what << " rank " << r;
                            held[r] = replica.Take();
                            return absl::OkStatus();
                          })
            .ok())
        << what;
    const FullState want = AssembleState(at2, *MakeShardPlan(MlpUnits(kHeldDims), n, 2));
    const std::vector<std::vector<HeldState>> survivors = {held[0], held[2]};
    ASSERT_TRUE(RunRanksAsThreads(
                    2, "replica_on" + what,
                    [&](int r, Communicator* comm) {
                      ZS_ASSIGN_OR_RETURN(const LiveState live,
                                          AgreeOnLiveState(*comm, survivors[r], stage, kTimeout));
                      EXPECT_TRUE(live.live) << what << ": " << live.why_not;
                      if (!live.live) return absl::OkStatus();
                      EXPECT_EQ(live.step, 2) << what;
                      ZS_ASSIGN_OR_RETURN(auto engine, HeldTestEngine(comm, stage, 1));
                      ZS_RETURN_IF_ERROR(ReshardInto(*comm, live, survivors[r], MlpUnits(kHeldDims),
                                                     *engine, kTimeout));
                      EXPECT_EQ(engine->optimizer_step(), at2[0].optimizer_step) << what;
                      ExpectStateMatches(want, *engine, absl::StrCat(what, " survivor ", r));
                      return absl::OkStatus();
                    })
                    .ok())
        << what;
  }
}

// A generation resharded live from generation 7's copies (step 2) loses
// rank 1 before its first refresh passes: the survivors still hold what it
// started from (PeerReplica::Keep) and go on from generation 7's step 2.
TEST(PeerReplicaTest, ARankLostBeforeTheFirstRefreshLeavesTheStartState) {
  const int stage = 3, n = 3, lost = 1;
  std::vector<HeldState> at2(n);
  std::vector<std::vector<HeldState>> copies(n), held(n);
  ASSERT_TRUE(RunRanksAsThreads(n, "replica_g7", [&](int r, Communicator* comm) {
                ZS_ASSIGN_OR_RETURN(auto engine, HeldTestEngine(comm, stage, 42));
                TrainSteps(*engine, r, n, 0, 2);
                PeerReplica replica;
                ZS_RETURN_IF_ERROR(replica.Refresh(*engine, *comm, 7, 2, kTimeout));
                ZS_ASSIGN_OR_RETURN(at2[r], SnapshotState(*engine, 7, 2));
                copies[r] = replica.Take();
                return absl::OkStatus();
              }).ok());
  ASSERT_TRUE(RunRanksAsThreads(n, "replica_g8", [&](int r, Communicator* comm) {
                ZS_ASSIGN_OR_RETURN(const LiveState live,
                                    AgreeOnLiveState(*comm, copies[r], stage, kTimeout));
                EXPECT_TRUE(live.live && live.generation == 7) << live.why_not;
                ZS_ASSIGN_OR_RETURN(auto engine, HeldTestEngine(comm, stage, 1));
                ZS_RETURN_IF_ERROR(
                    ReshardInto(*comm, live, copies[r], MlpUnits(kHeldDims), *engine, kTimeout));
                PeerReplica replica;
                replica.Keep(copies[r]);
                if (r == lost) return absl::OkStatus();  // Gone before the first refresh.
                EXPECT_FALSE(replica.Refresh(*engine, *comm, 8, 2, absl::Seconds(2)).ok());
                held[r] = replica.Take();
                return absl::OkStatus();
              }).ok());
  const FullState want = AssembleState(at2, *MakeShardPlan(MlpUnits(kHeldDims), n, 2));
  const std::vector<std::vector<HeldState>> survivors = {held[0], held[2]};
  ASSERT_TRUE(RunRanksAsThreads(2, "replica_g9", [&](int r, Communicator* comm) {
                ZS_ASSIGN_OR_RETURN(const LiveState live,
                                    AgreeOnLiveState(*comm, survivors[r], stage, kTimeout));
                EXPECT_TRUE(live.live) << live.why_not;
                if (!live.live) return absl::OkStatus();
                EXPECT_EQ(live.generation, 7u);
                EXPECT_EQ(live.step, 2);
                ZS_ASSIGN_OR_RETURN(auto engine, HeldTestEngine(comm, stage, 1));
                ZS_RETURN_IF_ERROR(
                    ReshardInto(*comm, live, survivors[r], MlpUnits(kHeldDims), *engine, kTimeout));
                ExpectStateMatches(want, *engine, absl::StrCat("survivor ", r));
                return absl::OkStatus();
              }).ok());
}

HeldState Held(int index, int64_t step, uint64_t generation = 7) {
  HeldState h;
  h.generation = generation;
  h.world_size = 3;
  h.stage = 3;
  h.index = index;
  h.step = step;
  h.optimizer_step = step;
  return h;
}

// What a refresh of step 3 cut short by rank 1's loss leaves, in each case
// of the note.
TEST(PeerReplicaTest, TheDecisionTakesTheNewestWholeStep) {
  // Rank 0 got rank 1's shard of step 3 before the barrier failed.
  const HeldState got[] = {Held(0, 2), Held(1, 2), Held(0, 3), Held(1, 3)};
  const HeldState other[] = {Held(2, 2), Held(0, 2), Held(2, 3)};
  LiveState d = DecideLiveState({DescribeHeld(got), DescribeHeld(other)}, 3);
  ASSERT_TRUE(d.live) << d.why_not;
  EXPECT_EQ(d.step, 3);
  EXPECT_EQ(d.source, (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(d.source_slot, (std::vector<int>{2, 3, 2}));
  // It did not: step 2, from the last refresh's copies.
  const HeldState missed[] = {Held(0, 2), Held(1, 2), Held(0, 3)};
  d = DecideLiveState({DescribeHeld(missed), DescribeHeld(other)}, 3);
  ASSERT_TRUE(d.live) << d.why_not;
  EXPECT_EQ(d.step, 2);
  EXPECT_EQ(d.source, (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(d.source_slot, (std::vector<int>{0, 1, 0}));
  // Generation 8 started from generation 7's step 2 and lost rank 1 before
  // its first refresh passed: generation 7's state, kept beside it.
  const HeldState kept0[] = {Held(0, 2), Held(1, 2), Held(0, 2, 8)};
  const HeldState kept2[] = {Held(2, 2), Held(0, 2), Held(2, 2, 8)};
  d = DecideLiveState({DescribeHeld(kept0), DescribeHeld(kept2)}, 3);
  ASSERT_TRUE(d.live) << d.why_not;
  EXPECT_EQ(d.generation, 7u);
  EXPECT_EQ(d.step, 2);
}

}  // namespace
}  // namespace zeroshard::testing
