// The worker's lifecycle machine (worker/trainer/lifecycle.h) along whole
// paths: the step boundary's agreement, and the three paths issue 39 names
// walked end to end (SIGTERM, redundancy with peer copies, rollback to a
// checkpoint), plus a forgotten member's rejoin.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "tests/trainer/lifecycle_testing.h"
#include "worker/trainer/lifecycle.h"

namespace zeroshard {
namespace {

using Phase = LifecyclePhase;
using Kind = LifecycleEventKind;
using Action = LifecycleAction;
using namespace lifecycle_testing;  // NOLINT: the shared statuses and actions.

LifecycleDecision AtBoundary(std::vector<StepFlags> flags, bool last_step = false) {
  LifecycleEvent committed(Kind::kStepCommitted);
  committed.flags = std::move(flags);
  committed.last_step = last_step;
  return Decide({Phase::kTraining}, committed);
}

TEST(WorkerLifecyclePathsTest, StepFlagsTravelAsOneDouble) {
  for (int bits = 0; bits < 8; ++bits) {
    const StepFlags f{(bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0};
    const StepFlags back = StepFlags::Decode(f.Encode());
    EXPECT_EQ(back.member_waiting, f.member_waiting);
    EXPECT_EQ(back.leave, f.leave);
    EXPECT_EQ(back.job_stopped, f.job_stopped);
  }
}

TEST(WorkerLifecyclePathsTest, AtAStepBoundaryTheRanksGoOnYieldOrStop) {
  const StepFlags none, waiting{.member_waiting = true}, leave{.leave = true},
      stopped{.job_stopped = true};
  {  // Nothing asked: go on.
    const LifecycleDecision d = AtBoundary({none, none, none});
    EXPECT_EQ(d.next.phase, Phase::kTraining);
    EXPECT_TRUE(d.actions.empty());
  }
  {  // A member waits (rank 0 says so): everyone yields, nobody leaves.
    const LifecycleDecision d = AtBoundary({waiting, none});
    EXPECT_EQ(d.actions, Actions{Action::kYield});
    EXPECT_TRUE(d.leaving.empty());
  }
  {  // Ranks 1 and 3 were sent SIGTERM: they leave, ascending.
    const LifecycleDecision d = AtBoundary({none, leave, none, leave});
    EXPECT_EQ(d.actions, Actions{Action::kYield});
    EXPECT_EQ(d.leaving, (std::vector<int>{1, 3}));
  }
  {  // The operator's stop wins over a leave: save here and end.
    const LifecycleDecision d = AtBoundary({stopped, leave});
    EXPECT_EQ(d.actions, Actions{Action::kStopTraining});
    EXPECT_TRUE(d.leaving.empty());
  }
  {  // At the job's last step nobody yields: the job ends there.
    const LifecycleDecision d = AtBoundary({waiting, leave}, /*last_step=*/true);
    EXPECT_TRUE(d.actions.empty());
    EXPECT_TRUE(d.leaving.empty());
  }
}

// Feeds `events` from kWaiting; returns every action taken, in order, and
// the final decision.
struct Walk {
  Actions actions;
  LifecycleDecision last;
};
Walk WalkFrom(const std::vector<LifecycleEvent>& events) {
  Walk w{{}, {}};
  LifecycleState state;
  for (const LifecycleEvent& e : events) {
    w.last = Decide(state, e);
    w.actions.insert(w.actions.end(), w.last.actions.begin(), w.last.actions.end());
    state = w.last.next;
  }
  return w;
}

LifecycleEvent Stopped(LifecycleEvent e) {
  e.stop = true;
  return e;
}

TEST(WorkerLifecyclePathsTest, SigtermPathHandsTheShardOverAndLeaves) {
  LifecycleEvent committed(Kind::kStepCommitted);
  committed.flags = {StepFlags{}, StepFlags{.leave = true}};
  const LifecycleDecision boundary = Decide({Phase::kTraining}, Stopped(committed));
  EXPECT_EQ(boundary.actions, Actions{Action::kYield});
  EXPECT_EQ(boundary.leaving, std::vector<int>{1});
  // Rank 1, the one stopped: load, train, yield, give its shard away, leave.
  const Walk leaver = WalkFrom({{Kind::kGenerationFormed},
                                {Kind::kStateLoaded},
                                Stopped({Kind::kYielded}),
                                Stopped({Kind::kGaveShardAway})});
  EXPECT_EQ(leaver.actions, (Actions{Action::kDropPeerCopies, Action::kLeave}));
  ASSERT_TRUE(leaver.last.exit.has_value());
  EXPECT_TRUE(leaver.last.exit->ok());
  // Rank 0, the first survivor: it reports the handoff and waits for the next.
  LifecycleEvent kept(Kind::kKeptHandoff);
  kept.first_survivor = true;
  const Walk survivor = WalkFrom({{Kind::kGenerationFormed},
                                  {Kind::kStateLoaded},
                                  {Kind::kYielded},
                                  kept,
                                  {Kind::kGenerationEnded}});
  EXPECT_EQ(survivor.actions, (Actions{Action::kDropPeerCopies, Action::kReportHandoff}));
  EXPECT_EQ(survivor.last.next.phase, Phase::kWaiting);
  // Stopped while waiting: a Leave and exit 0.
  const Walk waiting = WalkFrom({Stopped({Kind::kWaitFailed, absl::CancelledError("leave")})});
  EXPECT_EQ(waiting.actions, Actions{Action::kLeave});
  EXPECT_TRUE(waiting.last.exit.has_value() && waiting.last.exit->ok());
}

// Redundancy and rollback take the same lifecycle path: the peer copies
// are taken (a no-op without any), the failure reported, the end awaited,
// and the next generation loads: live from the copies, or the checkpoint.
TEST(WorkerLifecyclePathsTest, RedundancyAndRollbackPathsKeepCopiesReportAndGoOn) {
  const Walk w = WalkFrom({{Kind::kGenerationFormed},
                           {Kind::kStateLoaded},
                           {Kind::kFailed, absl::AbortedError("generation 3 ended")},
                           {Kind::kGenerationEnded},
                           {Kind::kGenerationFormed},
                           {Kind::kStateLoaded},
                           {Kind::kLastStepTrained}});
  EXPECT_EQ(w.actions,
            (Actions{Action::kTakePeerCopies, Action::kReportFailure, Action::kLeaveCompleted}));
  ASSERT_TRUE(w.last.exit.has_value());
  EXPECT_TRUE(w.last.exit->ok());
}

TEST(WorkerLifecyclePathsTest, AForgottenMemberRejoinsAfterTheCoordinatorConfirms) {
  const Walk w = WalkFrom({{Kind::kGenerationFormed},
                           {Kind::kFailed, Refused()},
                           {Kind::kForgottenConfirmed},
                           {Kind::kMemberForgotten, absl::NotFoundError("unknown member")},
                           {Kind::kRejoined}});
  EXPECT_EQ(w.actions, kFailureActions);
  EXPECT_EQ(w.last.next.phase, Phase::kWaiting);
}

// As before the machine: a Leave on a stop and the handoff report go out
// while the generation's communicators exist; failure reports and the
// job's last Leave after it is torn down.
TEST(WorkerLifecyclePathsTest, WhatGoesOutBeforeTheGenerationIsTornDown) {
  LifecycleEvent kept(Kind::kKeptHandoff);
  kept.first_survivor = true;
  EXPECT_TRUE(Decide({Phase::kHandingOff}, kept).before_teardown);
  EXPECT_TRUE(Decide({Phase::kHandingOff}, {Kind::kGaveShardAway}).before_teardown);
  EXPECT_TRUE(Decide({Phase::kTraining}, Stopped({Kind::kFailed, Lost()})).before_teardown);
  EXPECT_FALSE(Decide({Phase::kTraining}, {Kind::kFailed, Lost()}).before_teardown);
  EXPECT_FALSE(Decide({Phase::kLoading}, Stopped({Kind::kFailed, Lost()})).before_teardown);
  EXPECT_FALSE(Decide({Phase::kHandingOff}, {Kind::kFailed, Lost()}).before_teardown);
  EXPECT_FALSE(Decide({Phase::kTraining}, {Kind::kLastStepTrained}).before_teardown);
}

}  // namespace
}  // namespace zeroshard
