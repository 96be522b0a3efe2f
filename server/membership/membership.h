// Membership and generations: the coordinator's deterministic state machine
// for who is in the job (STYLE.md point 4). No sockets, no threads, no
// sleeps: every call takes `now` from the caller's clock, so tests drive it
// with a FakeClock.
//
// How it works:
// - Join admits a worker as a new member (fresh member_id) that waits for
//   the next generation (rank -1). A Join with the worker_id of a live
//   member replaces that member (a restarted worker), never duplicating it.
// - Heartbeat renews a member's lease. Tick(now) drops members silent for
//   longer than lease_timeout.
// - A running generation ends when one of its members is dropped (lease
//   expiry), leaves, or is replaced, or when a member reports a failure.
//   The state goes back to WAITING; the generation number stays until the
//   next one forms, and requests naming it are refused (CheckRunning).
// - A generation forms in Tick when the state is WAITING, at least
//   min_workers members are live and not departing (below), and `settle`
//   has passed since the last membership change (so a burst of joins or
//   losses forms one generation).
//   Ranks are dense 0..N-1, assigned in member_id (= join) order; at most
//   max_workers members get a rank, the rest keep waiting.
// - While a generation runs, a waiting joiner that could be admitted
//   (world size < max_workers) makes a change pending once `settle` has
//   passed since the last change (change_pending(), sent in heartbeat
//   replies to ranked members). The ranks then stop at their next step
//   boundary, hand their state over live (worker/trainer/live_reshard.h)
//   and one of them calls Handoff, which ends the generation (reason
//   "handoff", neither a failure nor a settle wait); the next one forms in
//   the next Tick. Ranks that do not hand off within `handoff_grace` have
//   the generation ended under them (reason "join"). handoff_grace = 0
//   ends it at once. The Handoff names the ranks that gave their shards
//   away to leave the job (a worker's stop signal): they become departing,
//   so the next generation forms without them even when their Leave comes
//   after the next Tick, and it forms once.
//
// Failure reports ([Note: suspects after a failure]): a member whose
// collective failed cannot reliably name the dead peer (in a ring, the
// error it sees may name a live neighbour that merely aborted, and on
// loopback every member has the same host), so the report is not taken as
// a verdict on any one rank. Instead every other member of the ended
// generation becomes a suspect. A suspect that heartbeats after the report
// is cleared; one still silent `suspect_grace` (the owner uses two
// heartbeat intervals) after the report is removed, reason "failure". The
// next generation waits until no suspect is left, so it forms once, without
// the dead member, about max(settle, suspect_grace) after the report
// instead of forming with it and then waiting out its lease. A live member
// heartbeats every interval from its own thread, so only a dead or stopped
// process (SIGSTOP stops its heartbeat too) stays silent that long.
//
// Job lifecycle: job_state() is kWaiting or kRunning (following the
// generation) until the job ends: kCompleted when the owner calls
// Complete (the last step is done), kFailed when more than max_failures
// failures have been counted. A failure is a running generation ending for
// a lost member: a failure report, a lease expiry or a replaced (restarted)
// member. Joins and leaves are scale events and never count; neither do
// the extra reports of one failure (they name an ended generation and are
// refused). An ended job forms no generation and admits no Join; live
// members keep heartbeating and may leave (the running generation, if any,
// goes on until they do, so they can finish the last step's barrier).
//
// Thread safety: not thread-safe; the owner (CoordinatorCore) serialises
// calls under its mutex.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/enum_words.h"

namespace zeroshard::server {

struct MembershipOptions {
  int min_workers = 1;
  int max_workers = 1024;
  absl::Duration settle = absl::Seconds(1);
  absl::Duration lease_timeout = absl::Seconds(5);
  // How long a suspect may stay silent after a failure report before it is
  // removed ([Note: suspects after a failure]).
  absl::Duration suspect_grace = absl::Seconds(2);
  // Failures the job tolerates; the next one fails the job. < 0: no limit.
  int64_t max_failures = 20;
  absl::Duration handoff_grace = absl::Seconds(30);
};

enum class GenerationState { kWaiting, kRunning };
enum class JobState { kWaiting, kRunning, kCompleted, kFailed };

// Why a generation ended (and the next formed), or why a member was removed.
// Metrics label them with ChangeReasonName; the owner creates each labelled
// counter series at 0 from the start (kGenerationReasons, kRemovalReasons),
// so Prometheus's increase() sees the first event of each.
enum class ChangeReason {
  kStart,               // The job's first generation.
  kCoordinatorRestart,  // The first generation after a coordinator restart.
  kJoin,                // A member joined (scale up).
  kLeave,               // A member left (scale down, or a stop).
  kFailure,             // A rank reported a failure, or a suspect stayed silent.
  kLeaseExpired,        // A member's heartbeats stopped.
  kRejoin,              // A worker joined again under its worker id.
  kHandoff,             // Ranks handed their state to the survivors and left.
};
// The metric label and log word of each reason (common/enum_words.h).
inline constexpr EnumWords<ChangeReason, 8> kChangeReasonWords{
    {{ChangeReason::kStart, "start"},
     {ChangeReason::kCoordinatorRestart, "coordinator_restart"},
     {ChangeReason::kJoin, "join"},
     {ChangeReason::kLeave, "leave"},
     {ChangeReason::kFailure, "failure"},
     {ChangeReason::kLeaseExpired, "lease_expired"},
     {ChangeReason::kRejoin, "rejoin"},
     {ChangeReason::kHandoff, "handoff"}}};
const char* ChangeReasonName(ChangeReason reason);
// A reason that counts as a failure of the job (failure, lease_expired, rejoin).
bool IsFailureReason(ChangeReason reason);
inline constexpr ChangeReason kGenerationReasons[] = {
    ChangeReason::kStart,   ChangeReason::kCoordinatorRestart,
    ChangeReason::kJoin,    ChangeReason::kLeave,
    ChangeReason::kFailure, ChangeReason::kLeaseExpired,
    ChangeReason::kRejoin,  ChangeReason::kHandoff};
inline constexpr ChangeReason kRemovalReasons[] = {ChangeReason::kLeaseExpired,
                                                   ChangeReason::kLeave, ChangeReason::kFailure,
                                                   ChangeReason::kRejoin};

// Where a Membership starts: from scratch, or from durable state after a
// coordinator restart.
struct MembershipStart {
  uint64_t last_generation = 0;                      // Highest generation number ever used.
  uint64_t member_id_base = 0;                       // Member ids are member_id_base + 1, + 2, ...
  ChangeReason first_reason = ChangeReason::kStart;  // Of the first generation formed.
  int64_t failures = 0;                              // Failures counted before.
  // kCompleted or kFailed if the job had ended; anything else: it had not.
  JobState ended = JobState::kWaiting;
  std::string ended_reason;
};

struct Member {
  uint64_t member_id = 0;
  std::string worker_id;
  std::string host;
  absl::Time joined;
  absl::Time last_heartbeat;
  int rank = -1;  // Rank in the running generation; -1 if waiting.
  // Handed its shard away at a handoff and is leaving: not ranked, not a
  // joiner to admit; its Leave (or lease expiry) removes it. One still
  // heartbeating lease_timeout after departing_since becomes a joiner.
  bool departing = false;
  absl::Time departing_since;
};

// Something that happened, for the owner to act on (drop KV keys, persist
// the counter, count metrics, wake watchers).
struct MembershipEvent {
  // kFailureCounted: a failure was counted (failures() grew);
  // kJobEnded: the job became kCompleted or kFailed (job_state_reason()).
  enum class Kind {
    kGenerationEnded,
    kGenerationFormed,
    kMemberRemoved,
    kFailureCounted,
    kJobEnded
  };
  Kind kind;
  uint64_t generation = 0;  // The generation that ended or formed.
  // Why (not kJobEnded's: see job_state_reason()).
  ChangeReason reason = ChangeReason::kStart;
  uint64_t member_id = 0;  // kMemberRemoved only.
  // kMemberRemoved: the member's worker id, and its rank in the running
  // generation or, for a suspect, in the generation its failure report
  // ended (-1 if it had none).
  std::string worker_id;
  int rank = -1;
};

class Membership {
 public:
  // The next generation formed is start.last_generation + 1; the owner
  // makes start.member_id_base unique across coordinator restarts.
  Membership(MembershipOptions options, MembershipStart start);

  // Returns the new member_id. The caller validated worker_id and host.
  // FAILED_PRECONDITION naming the state once the job has ended.
  absl::StatusOr<uint64_t> Join(const std::string& worker_id, const std::string& host,
                                absl::Time now);
  // NOT_FOUND if member_id is not a live member.
  absl::Status Heartbeat(uint64_t member_id, absl::Time now);
  absl::Status Leave(uint64_t member_id, absl::Time now);
  // Ends the running generation `generation` (reason "failure"), counts a
  // failure (`detail`, the reporter's reason, goes into the job's failure
  // reason if this one fails it) and makes the other members suspects.
  // NOT_FOUND for an unknown reporter; ABORTED if `generation` is not the
  // running one; PERMISSION_DENIED for a member without a rank in it (only
  // the ranks were in its collectives). Once ended, a generation takes no
  // second report, so each counts at most one failure.
  absl::Status ReportFailure(uint64_t member_id, uint64_t generation, const std::string& detail,
                             absl::Time now);
  // The job is done (kCompleted, `reason` e.g. "step 300 of 300 done"); a
  // no-op once the job has ended. The running generation is left running.
  void Complete(const std::string& reason, absl::Time now);
  // The ranks stopped at a step boundary with their state handed over:
  // ends the running generation `generation` (reason "handoff"). The
  // members at `leaving_ranks` of it become departing (Member::departing),
  // so the next generation forms without them whether or not their Leave
  // has arrived. NOT_FOUND for an unknown member; ABORTED if `generation`
  // is not the running one; PERMISSION_DENIED for a member without a rank
  // in it; INVALID_ARGUMENT for a leaving rank outside [0, world size),
  // equal to the reporter's or named twice (nothing changes then).
  absl::Status Handoff(uint64_t member_id, uint64_t generation, absl::Time now,
                       absl::Span<const int32_t> leaving_ranks = {});
  // Whether the running generation should stop at its next step boundary
  // for a membership change.
  bool change_pending() const { return change_pending_since_ != absl::InfiniteFuture(); }
  // Expires leases and forms or ends generations as the rules above say.
  void Tick(absl::Time now);

  // OK iff `generation` is the running generation; else ABORTED (retry after
  // re-reading the generation) naming `field`, the generation asked for and
  // the current one.
  absl::Status CheckRunning(uint64_t generation, const char* field) const;
  // OK iff `member_id` (a live member) has a rank in the running generation;
  // else PERMISSION_DENIED saying it may not `what`.
  absl::Status CheckRanked(uint64_t member_id, const char* what) const;

  // Moves out the events since the last call, in order.
  std::vector<MembershipEvent> TakeEvents();

  uint64_t generation() const { return generation_; }
  GenerationState state() const { return state_; }
  JobState job_state() const;
  bool job_ended() const { return ended_ != JobState::kWaiting; }
  // Why the job ended ("" while it has not).
  const std::string& job_state_reason() const { return ended_reason_; }
  int64_t failures() const { return failures_; }
  // Members of the ended generation still silent since a failure report.
  size_t suspects() const { return suspects_.size(); }
  int world_size() const { return static_cast<int>(ranked_.size()); }
  const Member* Find(uint64_t member_id) const;
  // Members of the running generation, by rank (empty while waiting).
  std::vector<const Member*> Ranked() const;
  // Live members without a rank, by member_id (departing ones included).
  std::vector<const Member*> Waiting() const;
  size_t live_members() const { return members_.size(); }
  // Members that may get a rank: the live ones but the departing.
  int Eligible() const;
  const MembershipOptions& options() const { return options_; }

 private:
  void Remove(uint64_t member_id, ChangeReason reason, absl::Time now);
  void EndGeneration(ChangeReason reason, absl::Time now, const std::string& detail = "");
  void CountFailure(ChangeReason reason, const std::string& detail);
  void EndJob(JobState state, const std::string& reason);
  void ExpireSuspects(absl::Time now);
  void Form(absl::Time now);
  absl::Status CheckLeavingRanks(uint64_t member_id, absl::Span<const int32_t> leaving_ranks) const;
  void ExpireDepartures(absl::Time now);

  const MembershipOptions options_;
  uint64_t generation_;  // Running, or the last one that ran (0 = none yet).
  GenerationState state_ = GenerationState::kWaiting;
  uint64_t next_member_id_;
  std::map<uint64_t, Member> members_;                        // By member_id (join order).
  std::map<std::string, uint64_t> by_worker_id_;              // worker_id -> member_id.
  std::vector<uint64_t> ranked_;                              // member_id by rank.
  absl::Time last_change_ = absl::InfinitePast();             // Last join/leave/loss.
  std::optional<ChangeReason> pending_reason_;                // Why the next generation forms.
  absl::Time change_pending_since_ = absl::InfiniteFuture();  // Running only.
  std::vector<MembershipEvent> events_;
  int64_t failures_ = 0;
  JobState ended_ = JobState::kWaiting;  // kCompleted or kFailed once the job ended.
  std::string ended_reason_;
  std::map<uint64_t, absl::Time> suspects_;  // member_id -> failure report time.
  std::map<uint64_t, int> suspect_ranks_;    // member_id -> rank in the ended generation.
};

const char* GenerationStateName(GenerationState s);
// "waiting", "running", "completed", "failed" (the metric's label values).
const char* JobStateName(JobState s);

}  // namespace zeroshard::server
