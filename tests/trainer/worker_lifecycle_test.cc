// The worker's lifecycle machine (worker/trainer/lifecycle.h), table-driven:
// every (state, event) pair the runtime can meet, with and without a stop
// request, gives today's actions and next state; every other pair is an
// internal error naming it. The three paths issue 39 names are walked end
// to end: SIGTERM, redundancy (peer copies) and rollback (a checkpoint).
#include <gtest/gtest.h>

#include <optional>
#include <set>
#include <string>
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

struct Row {
  Phase from;
  Kind event;
  bool stop;
  absl::Status status;  // The event's.
  Phase next;
  Actions actions;
  // nullopt: the worker goes on; else its exit code.
  std::optional<absl::StatusCode> exit;
};

constexpr auto kOk = absl::StatusCode::kOk;
constexpr Phase kAllPhases[] = {Phase::kWaiting,
                                Phase::kRejoining,
                                Phase::kLoading,
                                Phase::kTraining,
                                Phase::kHandingOff,
                                Phase::kConfirmingForgotten,
                                Phase::kEndingAfterHandoff,
                                Phase::kEndingAfterFailure,
                                Phase::kDone};
constexpr Kind kAllKinds[] = {
    Kind::kGenerationFormed, Kind::kJobCompleted,       Kind::kMemberForgotten,
    Kind::kWaitFailed,       Kind::kRejoined,           Kind::kNothingToJoin,
    Kind::kStateLoaded,      Kind::kStepCommitted,      Kind::kLastStepTrained,
    Kind::kYielded,          Kind::kKeptHandoff,        Kind::kGaveShardAway,
    Kind::kFailed,           Kind::kForgottenConfirmed, Kind::kForgottenNotConfirmed,
    Kind::kGenerationEnded,  Kind::kEndTimedOut};

const absl::Status ok = absl::OkStatus();
const absl::Status failed = absl::FailedPreconditionError("job j failed: too many failures");

// Outside a generation: waiting for one, joining anew.
std::vector<Row> MemberRows() {
  return {
      // Waiting for a generation.
      {Phase::kWaiting, Kind::kGenerationFormed, false, ok, Phase::kLoading, {}, std::nullopt},
      {Phase::kWaiting, Kind::kGenerationFormed, true, ok, Phase::kDone, {Action::kLeave}, kOk},
      {Phase::kWaiting, Kind::kJobCompleted, false, ok, Phase::kDone, {Action::kLeave}, kOk},
      {Phase::kWaiting, Kind::kJobCompleted, true, ok, Phase::kDone, {Action::kLeave}, kOk},
      {Phase::kWaiting,
       Kind::kMemberForgotten,
       false,
       absl::NotFoundError("lease"),
       Phase::kRejoining,
       {},
       std::nullopt},
      {Phase::kWaiting,
       Kind::kMemberForgotten,
       true,
       absl::NotFoundError("lease"),
       Phase::kDone,
       {Action::kLeave},
       kOk},
      {Phase::kWaiting,
       Kind::kWaitFailed,
       false,
       failed,
       Phase::kDone,
       {},
       absl::StatusCode::kFailedPrecondition},
      {Phase::kWaiting,
       Kind::kWaitFailed,
       true,
       absl::CancelledError("leave requested"),
       Phase::kDone,
       {Action::kLeave},
       kOk},
      // Joining anew.
      {Phase::kRejoining, Kind::kRejoined, false, ok, Phase::kWaiting, {}, std::nullopt},
      {Phase::kRejoining, Kind::kRejoined, true, ok, Phase::kWaiting, {}, std::nullopt},
      {Phase::kRejoining, Kind::kNothingToJoin, true, ok, Phase::kDone, {}, kOk},
      {Phase::kRejoining,
       Kind::kNothingToJoin,
       false,
       failed,
       Phase::kDone,
       {},
       absl::StatusCode::kFailedPrecondition},
  };
}

// In a generation: loading, training.
std::vector<Row> GenerationRows() {
  return {
      // Loading the generation's state.
      {Phase::kLoading, Kind::kStateLoaded, false, ok, Phase::kTraining, {}, std::nullopt},
      {Phase::kLoading, Kind::kStateLoaded, true, ok, Phase::kTraining, {}, std::nullopt},
      {Phase::kLoading, Kind::kFailed, false, Lost(), Phase::kEndingAfterFailure, kFailureActions,
       std::nullopt},
      {Phase::kLoading, Kind::kFailed, false, Own(), Phase::kDone, kFailureActions,
       absl::StatusCode::kFailedPrecondition},
      {Phase::kLoading, Kind::kFailed, false, Refused(), Phase::kConfirmingForgotten,
       kFailureActions, std::nullopt},
      {Phase::kLoading, Kind::kFailed, true, Lost(), Phase::kDone, kFailureLeave, kOk},
      // Training.
      {Phase::kTraining,
       Kind::kLastStepTrained,
       false,
       ok,
       Phase::kDone,
       {Action::kLeaveCompleted},
       kOk},
      {Phase::kTraining,
       Kind::kLastStepTrained,
       true,
       ok,
       Phase::kDone,
       {Action::kLeaveCompleted},
       kOk},
      {Phase::kTraining,
       Kind::kYielded,
       false,
       ok,
       Phase::kHandingOff,
       {Action::kDropPeerCopies},
       std::nullopt},
      {Phase::kTraining,
       Kind::kYielded,
       true,
       ok,
       Phase::kHandingOff,
       {Action::kDropPeerCopies},
       std::nullopt},
      {Phase::kTraining, Kind::kFailed, false, Lost(), Phase::kEndingAfterFailure, kFailureActions,
       std::nullopt},
      {Phase::kTraining, Kind::kFailed, false, Own(), Phase::kDone, kFailureActions,
       absl::StatusCode::kFailedPrecondition},
      {Phase::kTraining, Kind::kFailed, false, Refused(), Phase::kConfirmingForgotten,
       kFailureActions, std::nullopt},
      // SIGTERM while the generation broke: a leave while the communicators
      // exist, no failure report.
      {Phase::kTraining, Kind::kFailed, true, Lost(), Phase::kDone, {Action::kLeave}, kOk},
      {Phase::kTraining, Kind::kFailed, true, Own(), Phase::kDone, {Action::kLeave}, kOk},
  };
}

// Handing off, and after a generation broke or was handed off.
std::vector<Row> AfterGenerationRows() {
  return {
      // Handing off.
      {Phase::kHandingOff,
       Kind::kKeptHandoff,
       false,
       ok,
       Phase::kEndingAfterHandoff,
       {},
       std::nullopt},
      {Phase::kHandingOff, Kind::kGaveShardAway, true, ok, Phase::kDone, {Action::kLeave}, kOk},
      {Phase::kHandingOff, Kind::kFailed, false, Lost(), Phase::kEndingAfterFailure,
       kFailureActions, std::nullopt},
      {Phase::kHandingOff, Kind::kFailed, true, Lost(), Phase::kDone, kFailureLeave, kOk},
      // A refused credential.
      {Phase::kConfirmingForgotten,
       Kind::kForgottenConfirmed,
       false,
       ok,
       Phase::kWaiting,
       {},
       std::nullopt},
      {Phase::kConfirmingForgotten,
       Kind::kForgottenNotConfirmed,
       false,
       ok,
       Phase::kDone,
       {},
       absl::StatusCode::kPermissionDenied},
      // Waiting for the end.
      {Phase::kEndingAfterHandoff,
       Kind::kGenerationEnded,
       false,
       ok,
       Phase::kWaiting,
       {},
       std::nullopt},
      {Phase::kEndingAfterHandoff,
       Kind::kEndTimedOut,
       false,
       ok,
       Phase::kDone,
       {},
       absl::StatusCode::kDeadlineExceeded},
      {Phase::kEndingAfterFailure,
       Kind::kGenerationEnded,
       false,
       ok,
       Phase::kWaiting,
       {},
       std::nullopt},
      {Phase::kEndingAfterFailure,
       Kind::kEndTimedOut,
       false,
       ok,
       Phase::kDone,
       {},
       absl::StatusCode::kUnavailable},
  };
}

std::vector<Row> Table() {
  std::vector<Row> rows = MemberRows();
  for (auto part : {GenerationRows(), AfterGenerationRows()}) {
    rows.insert(rows.end(), part.begin(), part.end());
  }
  return rows;
}

// The failure a kConfirmingForgotten or kEndingAfterFailure state carries.
LifecycleState StateOf(Phase phase) {
  if (phase == Phase::kConfirmingForgotten) return {phase, Refused()};
  if (phase == Phase::kEndingAfterFailure) return {phase, Lost()};
  return {phase};
}

std::string Describe(const Row& row) {
  return std::string(LifecyclePhaseName(row.from)) + " + " +
         std::string(LifecycleEventName(row.event)) + (row.stop ? " (stop)" : "");
}

TEST(WorkerLifecycleTest, EveryPairTheRuntimeMeetsDecidesAsToday) {
  for (const Row& row : Table()) {
    SCOPED_TRACE(Describe(row));
    LifecycleEvent event(row.event, row.status);
    event.stop = row.stop;
    const LifecycleDecision d = Decide(StateOf(row.from), event);
    EXPECT_EQ(LifecyclePhaseName(d.next.phase), LifecyclePhaseName(row.next));
    std::vector<std::string_view> got, want;
    for (Action a : d.actions) got.push_back(LifecycleActionName(a));
    for (Action a : row.actions) want.push_back(LifecycleActionName(a));
    EXPECT_EQ(got, want);
    ASSERT_EQ(d.exit.has_value(), row.exit.has_value());
    if (row.exit) {
      EXPECT_EQ(d.exit->code(), *row.exit) << d.exit->message();
    }
  }
}

TEST(WorkerLifecycleTest, AFailureKeepsItsStatusUntilTheWorkerExitsOnIt) {
  LifecycleEvent failed(Kind::kFailed, Lost());
  const LifecycleDecision d = Decide({Phase::kTraining}, failed);
  EXPECT_EQ(d.next.failure, Lost());
  const LifecycleDecision timed_out = Decide(d.next, {Kind::kEndTimedOut});
  ASSERT_TRUE(timed_out.exit.has_value());
  EXPECT_EQ(*timed_out.exit, Lost());
}

TEST(WorkerLifecycleTest, EveryOtherPairIsAnInternalErrorNamingIt) {
  std::set<std::pair<Phase, Kind>> handled;
  for (const Row& row : Table()) handled.insert({row.from, row.event});
  handled.insert({Phase::kTraining, Kind::kStepCommitted});  // Its own tests below.
  int unexpected = 0;
  for (Phase phase : kAllPhases) {
    for (Kind kind : kAllKinds) {
      if (handled.count({phase, kind})) continue;
      const LifecycleDecision d = Decide(StateOf(phase), {kind});
      ASSERT_TRUE(d.exit.has_value()) << LifecyclePhaseName(phase);
      EXPECT_EQ(d.exit->code(), absl::StatusCode::kInternal);
      EXPECT_NE(d.exit->message().find(std::string(LifecycleEventName(kind))), std::string::npos);
      EXPECT_NE(d.exit->message().find(std::string(LifecyclePhaseName(phase))), std::string::npos);
      ++unexpected;
    }
  }
  EXPECT_GT(unexpected, 100);
}

}  // namespace
}  // namespace zeroshard
