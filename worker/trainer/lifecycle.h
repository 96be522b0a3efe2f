// A worker's life in a job as one pure state machine: Decide(state, event)
// says what the worker does next and which state it is in after, and
// nothing else (no I/O, no clock, no locks). worker_runtime.cc is the thin
// runtime that drives it: in each state it runs the one blocking operation
// that state stands for (wait for a generation, load state, train, hand
// off, wait for the end), turns its outcome into an event, asks Decide,
// and applies the actions in order. The shape follows etcd-raft's
// deterministic core (events in, actions out); lifecycle_test.cc covers
// every (state, event) pair the runtime can meet.
//
// The three paths a change must not silently alter:
// - SIGTERM (the stop token): at a step boundary this rank's flag makes
//   the ranks yield; it gives its shard to the survivors, sends Leave and
//   exits 0. While waiting for a generation, or when its generation breaks,
//   it sends Leave (after reporting the failure, where one is reported).
// - Redundancy (peer copies, --redundancy 1): after a failure the worker
//   takes the copies of the last refreshed step as the state it holds, so
//   the next generation can reshard live without a checkpoint.
// - Rollback: after a failure with no copies the next generation restores
//   the latest committed checkpoint (LoadBestState's choice).
//
// Thread safety: pure functions over values.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace zeroshard {

enum class LifecyclePhase {
  kWaiting,              // A member: waiting for a generation that includes it.
  kRejoining,            // The coordinator forgot this member: joining anew.
  kLoading,              // In a generation: loading the best state into the engine.
  kTraining,             // Training steps.
  kHandingOff,           // The ranks yielded at a step boundary: handing state over.
  kConfirmingForgotten,  // A refused credential: does the coordinator still know us?
  kEndingAfterHandoff,   // Waiting for the coordinator to end the handed-off generation.
  kEndingAfterFailure,   // Waiting for it to end the generation that failed.
  kDone,                 // Terminal: the worker exits with Decision::exit.
};

struct LifecycleState {
  LifecycleState(LifecyclePhase p = LifecyclePhase::kWaiting, absl::Status f = absl::OkStatus())
      : phase(p), failure(std::move(f)) {}
  LifecyclePhase phase;
  // The error that broke the generation (kConfirmingForgotten,
  // kEndingAfterFailure): the worker's exit status if the wait fails.
  absl::Status failure;
};

enum class LifecycleEventKind {
  kGenerationFormed,       // kWaiting: a running generation includes this member.
  kJobCompleted,           // kWaiting: the job completed while it waited.
  kMemberForgotten,        // kWaiting: NOT_FOUND (its lease lapsed, or a restart forgot it).
  kWaitFailed,             // kWaiting: any other error (the job failed, a timeout): `status`.
  kRejoined,               // kRejoining: joined as a new member.
  kNothingToJoin,          // kRejoining: the job ended, or a stop came while joining: `status`.
  kStateLoaded,            // kLoading: resharded live, restored, or initialised.
  kStepCommitted,          // kTraining: a step record with every rank's `flags`.
  kLastStepTrained,        // kTraining: the job's last step (or the operator's stop step) is saved.
  kYielded,                // kTraining: the ranks stopped early at a step boundary.
  kKeptHandoff,            // kHandingOff: this survivor holds its part; `first_survivor`.
  kGaveShardAway,          // kHandingOff: this rank left its shard with the survivors.
  kFailed,                 // kLoading, kTraining, kHandingOff: `status`.
  kForgottenConfirmed,     // kConfirmingForgotten: a heartbeat said NOT_FOUND.
  kForgottenNotConfirmed,  // kConfirmingForgotten: the member is still known.
  kGenerationEnded,        // kEnding*: the coordinator ended the generation.
  kEndTimedOut,            // kEnding*: it did not within the worker's wait.
};

// One rank's flags at a step boundary, all-gathered with the step record.
struct StepFlags {
  bool member_waiting = false;  // Rank 0 only: a member waits to be admitted.
  bool leave = false;           // This rank's stop token is set: it leaves.
  bool job_stopped = false;     // An operator stopped the job (StopJob).

  // Carried in the record's all-gather of doubles (exact for small integers).
  double Encode() const;
  static StepFlags Decode(double packed);
};

struct LifecycleEvent {
  LifecycleEvent(LifecycleEventKind k, absl::Status s = absl::OkStatus())
      : kind(k), status(std::move(s)) {}
  LifecycleEventKind kind;
  // kWaitFailed, kNothingToJoin, kFailed. Decide reads a kFailed status's
  // kind: a lost generation (a peer's departure or the generation's end:
  // UNAVAILABLE, ABORTED, DEADLINE_EXCEEDED, CANCELLED) waits for the next
  // one; a coordinator's refusal of this member (coordinator_refusal.h)
  // asks whether the coordinator forgot it; any other error is this
  // worker's own and ends it.
  absl::Status status;
  bool stop = false;            // The worker's stop token, read when the event was seen.
  bool first_survivor = false;  // kKeptHandoff: reports the handoff.
  // kStepCommitted: every rank's flags (index = rank), and whether the
  // committed step is the job's last.
  std::vector<StepFlags> flags;
  bool last_step = false;
};

enum class LifecycleAction {
  kReportFailure,   // Tell the coordinator the generation failed.
  kReportHandoff,   // Tell it the generation ended by a handoff.
  kLeave,           // Leave the job.
  kLeaveCompleted,  // Leave having trained the job's last step.
  kTakePeerCopies,  // Hold the peer copies of the last refreshed step, if any.
  kDropPeerCopies,  // The handoff is newer than any copy.
  kStopTraining,    // kStepCommitted: the operator stopped the job: save here, end.
  kYield,           // kStepCommitted: stop early and hand off (`leaving`).
};

struct LifecycleDecision {
  LifecycleState next;
  std::vector<LifecycleAction> actions;
  std::optional<absl::Status> exit;  // Set with next.phase == kDone.
  std::vector<int> leaving;          // kYield: the ranks that leave, ascending.
  // The actions go out while this rank's communicators and engine still
  // exist (a Leave then ends the generation as a leave, and the handoff is
  // reported before any rank tears down); otherwise a generation being
  // left is torn down first.
  bool before_teardown = false;
};

LifecycleDecision Decide(const LifecycleState& state, const LifecycleEvent& event);

std::string_view LifecyclePhaseName(LifecyclePhase phase);
std::string_view LifecycleEventName(LifecycleEventKind kind);
std::string_view LifecycleActionName(LifecycleAction action);

}  // namespace zeroshard
