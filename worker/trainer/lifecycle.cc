#include "worker/trainer/lifecycle.h"

#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/enum_words.h"
#include "worker/trainer/coordinator_refusal.h"

namespace zeroshard {
namespace {

using Phase = LifecyclePhase;
using Kind = LifecycleEventKind;
using Action = LifecycleAction;

constexpr int kFlagMemberWaiting = 1, kFlagLeave = 2, kFlagJobStopped = 4;

// Errors a peer's departure or the generation's end cause in this worker
// (abseil's retry guidance: UNAVAILABLE and DEADLINE_EXCEEDED retry the
// call, ABORTED retries higher up: here, the next generation; the
// coordinator answers ABORTED for a stale generation). Anything else, such
// as a checkpoint that does not match the model (FAILED_PRECONDITION) or a
// bad config, is this worker's own error.
bool IsGenerationLoss(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsAborted(s) || absl::IsDeadlineExceeded(s) ||
         absl::IsCancelled(s);
}

LifecycleDecision Go(Phase next, std::vector<Action> actions = {}) {
  return {{next, absl::OkStatus()}, std::move(actions), std::nullopt, {}};
}

LifecycleDecision Exit(absl::Status status, std::vector<Action> actions = {}) {
  return {{Phase::kDone, absl::OkStatus()}, std::move(actions), std::move(status), {}};
}

LifecycleDecision BeforeTeardown(LifecycleDecision d) {
  d.before_teardown = true;
  return d;
}

// A pair the runtime never produces: the worker stops with an internal
// error naming it, rather than guessing.
LifecycleDecision Unexpected(const LifecycleState& state, const LifecycleEvent& event) {
  return Exit(absl::InternalError(
      absl::StrCat("worker lifecycle: event ", std::string(LifecycleEventName(event.kind)),
                   " in state ", std::string(LifecyclePhaseName(state.phase)))));
}

LifecycleDecision FromWaiting(const LifecycleState& state, const LifecycleEvent& event) {
  // A forgotten member rejoins unless it is stopping; any other outcome of
  // the wait, a formed generation included, is a leave once stopped.
  if (event.kind == Kind::kMemberForgotten && !event.stop) return Go(Phase::kRejoining);
  if (event.stop) return Exit(absl::OkStatus(), {Action::kLeave});
  switch (event.kind) {
    case Kind::kGenerationFormed:
      return Go(Phase::kLoading);
    case Kind::kJobCompleted:
      return Exit(absl::OkStatus(), {Action::kLeave});
    case Kind::kWaitFailed:
      return Exit(event.status);
    default:
      return Unexpected(state, event);
  }
}

LifecycleDecision FromRejoining(const LifecycleState& state, const LifecycleEvent& event) {
  if (event.kind == Kind::kRejoined) return Go(Phase::kWaiting);
  if (event.kind == Kind::kNothingToJoin) return Exit(event.status);
  return Unexpected(state, event);
}

// The generation broke under this worker: keep the newest state it can
// (the peer copies), tell the coordinator, then leave if stopping, confirm
// a refused credential, wait for the end of a lost generation, or stop on
// an error of its own.
LifecycleDecision AfterFailure(const LifecycleEvent& event) {
  std::vector<Action> actions = {Action::kTakePeerCopies, Action::kReportFailure};
  if (event.stop) {
    actions.push_back(Action::kLeave);
    return Exit(absl::OkStatus(), std::move(actions));
  }
  Phase next = Phase::kEndingAfterFailure;
  if (IsCoordinatorRefusal(event.status)) {
    next = Phase::kConfirmingForgotten;
  } else if (!IsGenerationLoss(event.status)) {
    return Exit(event.status, std::move(actions));
  }
  LifecycleDecision d = Go(next, std::move(actions));
  d.next.failure = event.status;
  return d;
}

LifecycleDecision AtStepBoundary(const LifecycleEvent& event) {
  LifecycleDecision d = Go(Phase::kTraining);
  bool stopped = false, yield = false;
  std::vector<int> leaving;
  for (size_t r = 0; r < event.flags.size(); ++r) {
    const StepFlags& f = event.flags[r];
    stopped |= f.job_stopped;
    yield |= f.member_waiting || f.leave;
    if (f.leave) leaving.push_back(static_cast<int>(r));
  }
  // The operator's stop wins: the step is saved and is the job's last. At
  // the job's last step nobody yields: the job ends there anyway.
  if (stopped) {
    d.actions.push_back(Action::kStopTraining);
  } else if (yield && !event.last_step) {
    d.actions.push_back(Action::kYield);
    d.leaving = std::move(leaving);
  }
  return d;
}

LifecycleDecision FromTraining(const LifecycleState& state, const LifecycleEvent& event) {
  switch (event.kind) {
    case Kind::kStepCommitted:
      return AtStepBoundary(event);
    case Kind::kLastStepTrained:
      return Exit(absl::OkStatus(), {Action::kLeaveCompleted});
    case Kind::kYielded:
      return Go(Phase::kHandingOff, {Action::kDropPeerCopies});
    case Kind::kFailed:
      // Stopped while the generation broke: leave while this rank's
      // communicators still exist, so the generation ends as a leave.
      if (event.stop) return BeforeTeardown(Exit(absl::OkStatus(), {Action::kLeave}));
      return AfterFailure(event);
    default:
      return Unexpected(state, event);
  }
}

LifecycleDecision FromHandingOff(const LifecycleState& state, const LifecycleEvent& event) {
  switch (event.kind) {
    case Kind::kKeptHandoff:
      return BeforeTeardown(Go(Phase::kEndingAfterHandoff,
                               event.first_survivor ? std::vector<Action>{Action::kReportHandoff}
                                                    : std::vector<Action>{}));
    case Kind::kGaveShardAway:
      return BeforeTeardown(Exit(absl::OkStatus(), {Action::kLeave}));
    case Kind::kFailed:
      return AfterFailure(event);
    default:
      return Unexpected(state, event);
  }
}

LifecycleDecision FromConfirming(const LifecycleState& state, const LifecycleEvent& event) {
  // Confirmed: the next wait answers NOT_FOUND and the worker joins again.
  if (event.kind == Kind::kForgottenConfirmed) return Go(Phase::kWaiting);
  if (event.kind == Kind::kForgottenNotConfirmed) return Exit(state.failure);
  return Unexpected(state, event);
}

LifecycleDecision FromEnding(const LifecycleState& state, const LifecycleEvent& event) {
  if (event.kind == Kind::kGenerationEnded) return Go(Phase::kWaiting);
  if (event.kind != Kind::kEndTimedOut) return Unexpected(state, event);
  if (state.phase == Phase::kEndingAfterFailure) return Exit(state.failure);
  return Exit(absl::DeadlineExceededError("the generation did not end after the handoff"));
}

constexpr std::array<EnumWord<Phase>, 9> kPhaseWords = {{
    {Phase::kWaiting, "waiting"},
    {Phase::kRejoining, "rejoining"},
    {Phase::kLoading, "loading"},
    {Phase::kTraining, "training"},
    {Phase::kHandingOff, "handing_off"},
    {Phase::kConfirmingForgotten, "confirming_forgotten"},
    {Phase::kEndingAfterHandoff, "ending_after_handoff"},
    {Phase::kEndingAfterFailure, "ending_after_failure"},
    {Phase::kDone, "done"},
}};

constexpr std::array<EnumWord<Kind>, 17> kEventWords = {{
    {Kind::kGenerationFormed, "generation_formed"},
    {Kind::kJobCompleted, "job_completed"},
    {Kind::kMemberForgotten, "member_forgotten"},
    {Kind::kWaitFailed, "wait_failed"},
    {Kind::kRejoined, "rejoined"},
    {Kind::kNothingToJoin, "nothing_to_join"},
    {Kind::kStateLoaded, "state_loaded"},
    {Kind::kStepCommitted, "step_committed"},
    {Kind::kLastStepTrained, "last_step_trained"},
    {Kind::kYielded, "yielded"},
    {Kind::kKeptHandoff, "kept_handoff"},
    {Kind::kGaveShardAway, "gave_shard_away"},
    {Kind::kFailed, "failed"},
    {Kind::kForgottenConfirmed, "forgotten_confirmed"},
    {Kind::kForgottenNotConfirmed, "forgotten_not_confirmed"},
    {Kind::kGenerationEnded, "generation_ended"},
    {Kind::kEndTimedOut, "end_timed_out"},
}};

constexpr std::array<EnumWord<Action>, 8> kActionWords = {{
    {Action::kReportFailure, "report_failure"},
    {Action::kReportHandoff, "report_handoff"},
    {Action::kLeave, "leave"},
    {Action::kLeaveCompleted, "leave_completed"},
    {Action::kTakePeerCopies, "take_peer_copies"},
    {Action::kDropPeerCopies, "drop_peer_copies"},
    {Action::kStopTraining, "stop_training"},
    {Action::kYield, "yield"},
}};

}  // namespace

double StepFlags::Encode() const {
  return (member_waiting ? kFlagMemberWaiting : 0) + (leave ? kFlagLeave : 0) +
         (job_stopped ? kFlagJobStopped : 0);
}

StepFlags StepFlags::Decode(double packed) {
  const int bits = static_cast<int>(packed);
  return {(bits & kFlagMemberWaiting) != 0, (bits & kFlagLeave) != 0,
          (bits & kFlagJobStopped) != 0};
}

LifecycleDecision Decide(const LifecycleState& state, const LifecycleEvent& event) {
  switch (state.phase) {
    case Phase::kWaiting:
      return FromWaiting(state, event);
    case Phase::kRejoining:
      return FromRejoining(state, event);
    case Phase::kLoading:
      if (event.kind == Kind::kStateLoaded) return Go(Phase::kTraining);
      if (event.kind == Kind::kFailed) return AfterFailure(event);
      return Unexpected(state, event);
    case Phase::kTraining:
      return FromTraining(state, event);
    case Phase::kHandingOff:
      return FromHandingOff(state, event);
    case Phase::kConfirmingForgotten:
      return FromConfirming(state, event);
    case Phase::kEndingAfterHandoff:
    case Phase::kEndingAfterFailure:
      return FromEnding(state, event);
    case Phase::kDone:
      break;
  }
  return Unexpected(state, event);
}

std::string_view LifecyclePhaseName(LifecyclePhase phase) { return WordOf(kPhaseWords, phase); }
std::string_view LifecycleEventName(LifecycleEventKind kind) { return WordOf(kEventWords, kind); }
std::string_view LifecycleActionName(LifecycleAction action) {
  return WordOf(kActionWords, action);
}

}  // namespace zeroshard
