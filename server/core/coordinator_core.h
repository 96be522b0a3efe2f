// The coordinator's logic behind its RPCs: membership and generations
// (server/membership/), the shard plan, the rendezvous store (server/kv/),
// training state and durable state (server/state/), all under one mutex.
// Requests and responses are the protobuf messages of coordinator.proto;
// the gRPC service (server/rpc/coordinator_service.h) only translates
// Status and streams.
//
// Time comes from the injected Clock; Tick() applies it (lease expiry,
// settle, forming generations) and is called by the server's ticker thread,
// or by tests with a FakeClock. The only real-time waits are KvWait and
// WaitForGenerationChange, which block for at most the caller's deadline.
//
// Job lifecycle (server/membership/membership.h): the core reads the job's
// `steps` and `max_failures` from job_config_json (a config that is not a
// JobConfig: no completion, the default budget). The job completes when
// every rank of the generation has reported `steps` ([Note: agreed step],
// training_state.h) or left with job_completed ([Note: completion claims]);
// failures past
// max_failures fail it. StopJob (an operator's stop) completes it at the
// ranks' next step boundary: the heartbeats carry stop_requested and the
// ranks' Leave with job_completed ends it as "stopped by request at step N"
// (the request itself lives in memory until then). Either end is persisted,
// so a restarted coordinator forms no generation for an ended job, unless
// the config it is started with raises `steps` above the last step (for a
// stopped job: above the steps of the config it was stopped under) or
// max_failures to at least the failures counted: then the job runs again. A failure report makes
// the other members suspects; those silent for two heartbeat intervals (at most the lease) are
// removed ([Note: suspects after a failure]).
//
// Restart ([Note: generation after restart]): a coordinator restarted on a
// state dir bumps the persisted generation counter by one before serving,
// so every generation number it reports is above every one reported before
// the restart, and the next generation formed is higher still. Members are
// not persisted: a worker's Heartbeat gets NOT_FOUND and it Joins again.
//
// Effects (core_effects.h): a call decides under the mutex and applies
// after it: the generation counter and the job's lifecycle are written to
// the state dir (write, fsync, rename) and its log lines printed once the
// mutex is released, in the order the calls held it, so heartbeats, the
// rendezvous store and status reads do not wait for the disk. The job's
// end is the exception: it is on disk before the mutex is released, so no
// worker sees COMPLETED or FAILED (and exits) before a restart would. The step is
// persisted before its report is recorded (outside the mutex too); the
// job's units, once, at the first Join, under it (that Join fails if the
// write does).
//
// Thread safety: all methods are thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/infra/metrics.h"
#include "common/shard_plan.h"
#include "server/core/core_effects.h"
#include "server/core/core_metrics.h"
#include "server/kv/kv_store.h"
#include "server/kv/kv_waiters.h"
#include "server/membership/membership.h"
#include "server/state/durable_state.h"
#include "server/state/training_state.h"
#include "zeroshard/v1/coordinator.pb.h"

namespace zeroshard::server {

// The start of the reason of a job an operator stopped (StopJob).
inline constexpr char kStoppedByRequest[] = "stopped by request";
bool IsStoppedByRequest(const std::string& job_ended_reason);

struct CoreOptions {
  std::string job_id = "default";
  int min_workers = 1;
  int max_workers = 1024;
  absl::Duration settle = absl::Seconds(1);
  absl::Duration heartbeat_interval = absl::Seconds(1);
  absl::Duration lease_timeout = absl::Seconds(5);
  // How long a running generation may take to hand off for a joiner
  // (server/membership/membership.h); 0 = end it at once.
  absl::Duration handoff_grace = absl::Seconds(30);
  int64_t alignment = kDefaultShardAlignment;  // Shard plan alignment, elements.
  std::string job_config_json;                 // "" = keep the persisted one (or "{}").
  size_t max_members = 65536;                  // Live members, waiting ones included.
  // The job's model definition, from its job config (the model preset's
  // units); a Join whose units differ is refused naming the first
  // difference. Empty = the first Join that carries units defines them
  // (a standalone coordinator without a job config).
  std::vector<UnitSpec> units;
  // Served without TLS and tokens on a non-loopback address (--insecure):
  // shown as zeroshard_build_info{insecure="true"}.
  bool insecure = false;
  // Parked KvWaits (server/kv/kv_waiters.h): per caller (peer host), and in all.
  int max_kv_waits_per_caller = 1024;
  int max_kv_waits = 16384;
};

class CoordinatorCore {
 public:
  // The job config's steps (0: unknown) and max_failures.
  struct JobLimits {
    int64_t steps = 0;
    int64_t max_failures = 20;
  };

  // Validates options (INVALID_ARGUMENT naming the option), loads the
  // durable state (FAILED_PRECONDITION if it belongs to another job id) and
  // persists the job and the bumped generation counter. `clock` and
  // `metrics` must outlive the core.
  static absl::StatusOr<std::unique_ptr<CoordinatorCore>> Create(
      const CoreOptions& options, std::unique_ptr<DurableState> durable, const Clock* clock,
      MetricsRegistry* metrics);

  absl::StatusOr<v1::JoinResponse> Join(const v1::JoinRequest& request);
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(const v1::HeartbeatRequest& request);
  absl::Status Leave(const v1::LeaveRequest& request);
  absl::StatusOr<v1::ReportFailureResponse> ReportFailure(const v1::ReportFailureRequest& request);
  // Membership::Handoff: ends the running generation as a handoff.
  absl::StatusOr<v1::ReportHandoffResponse> ReportHandoff(const v1::ReportHandoffRequest& request);
  absl::StatusOr<v1::GenerationInfo> GetGeneration(const v1::GetGenerationRequest& request);
  // Blocks until a generation forms or ends after change number `seen`
  // (from a previous call; 0 = return at once), the deadline passes, or
  // Shutdown. Returns the info and the change number it reflects;
  // UNAVAILABLE after Shutdown.
  absl::StatusOr<std::pair<v1::GenerationInfo, uint64_t>> WaitForGenerationChange(
      const v1::GetGenerationRequest& request, uint64_t seen, absl::Time deadline);

  absl::Status KvSet(const v1::KvSetRequest& request);
  absl::StatusOr<std::string> KvGet(const v1::KvGetRequest& request);
  // Blocks (real time) up to timeout_ms for every key; DEADLINE_EXCEEDED
  // naming a missing key; ABORTED if the generation ends first;
  // UNAVAILABLE after Shutdown.
  // Blocking form of StartKvWait, for in-process callers and tests.
  absl::Status KvWait(const v1::KvWaitRequest& request);
  // The form the gRPC adapter uses: no thread waits. Validates `request`
  // (the error is returned and `done` never called), then parks it for
  // `caller` (a peer host; per-caller limits, RESOURCE_EXHAUSTED naming
  // them) until its keys exist. `done` gets the outcome exactly once: OK,
  // DEADLINE_EXCEEDED (the core's clock, applied by Tick), ABORTED (the
  // generation ended), UNAVAILABLE (Shutdown) or CANCELLED (CancelKvWait);
  // at once if every key is already there. It runs under the core's lock
  // (KvWaiters' rule: hand the outcome off only). Returns the wait's id.
  absl::StatusOr<uint64_t> StartKvWait(const v1::KvWaitRequest& request, const std::string& caller,
                                       KvWaitDone done);
  // Finishes wait `id` with CANCELLED (the client went away) and frees its
  // slot; no-op if it already finished.
  void CancelKvWait(uint64_t id);
  size_t parked_kv_waits() const;
  absl::StatusOr<int64_t> KvAdd(const v1::KvAddRequest& request);

  absl::Status ReportStep(const v1::StepReport& request);
  absl::StatusOr<v1::JobStatus> GetJobStatus(const v1::GetJobStatusRequest& request);
  // FAILED_PRECONDITION once the job ended, or for another job id.
  absl::StatusOr<v1::StopJobResponse> StopJob(const v1::StopJobRequest& request);

  // Applies the clock: lease expiry, suspects, generation end and formation.
  void Tick();
  // Wakes every waiter with UNAVAILABLE; later waits return at once.
  void Shutdown();

  // Read-only views for the server and the checkpoint service.
  uint64_t generation() const;
  GenerationState state() const;
  JobState job_state() const;
  // The running generation's members by rank (empty while waiting).
  std::vector<v1::MemberInfo> RankedMembers() const;
  // The job's units (CoreOptions::units, else the first Join's; empty until known).
  std::vector<UnitSpec> units() const;
  // For the RPC layer's member binding (server/rpc/auth_gate.h): whether
  // `member_id` is live, and the live member with `worker_id`, if any.
  bool IsLiveMember(uint64_t member_id) const;
  std::optional<uint64_t> LiveMemberOf(const std::string& worker_id) const;
  // A member's place in the running generation, for the RPC layer's rank
  // binding of writes (server/rpc/ranked_caller.h): nullopt when it is not
  // live, has no rank, or no generation runs.
  struct RankedMember {
    uint64_t member_id = 0;
    uint64_t generation = 0;
    int rank = -1;
    int world_size = 0;
    int64_t job_step = 0;  // The job's step: the lowest every rank reported.
  };
  std::optional<RankedMember> RankOf(uint64_t member_id) const;
  // The job's real sizes, read under one lock: what the checkpoint service
  // checks requests against (server/checkpoint/checkpoint_store.h).
  struct JobSizes {
    uint64_t generation = 0;  // Newest generation formed.
    int world_size = 0;       // Its world size while running, else 0.
    std::vector<UnitSpec> units;
    int64_t steps = 0;  // The job config's steps; 0 = not set.
    int max_workers = 0;
    int64_t alignment = 1;
  };
  JobSizes job_sizes() const;
  int64_t alignment() const { return options_.alignment; }
  const std::string& job_id() const { return options_.job_id; }
  DurableState* durable() { return durable_.get(); }
  // Time of the last Tick (for /healthz: a wedged core stops ticking).
  // Lock-free, so it answers even when the core is stuck.
  absl::Time last_tick() const;

 private:
  CoordinatorCore(const CoreOptions& options, std::unique_ptr<DurableState> durable,
                  const Clock* clock, MetricsRegistry* metrics, const DurableSnapshot& snapshot,
                  const JobLimits& limits);

  // Acts on membership events: drop keys, persist, count, log, wake watchers.
  void DrainEventsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PersistLifecycleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Completes the job if `step` reaches its steps.
  void MaybeCompleteLocked(int64_t step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CompleteStoppedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeCompleteStopLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A Leave with job_completed from `m` ([Note: completion claims]); true
  // once every rank of its generation has made one.
  bool ClaimCompletionLocked(const Member& m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::JobState JobStateProtoLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RebuildPlanLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SetUnitsLocked(const google::protobuf::RepeatedPtrField<v1::UnitSpec>& units)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::MemberInfo MemberInfoLocked(const Member& m) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<v1::GenerationInfo> GenerationInfoLocked(uint64_t member_id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The reporter of `r` is a ranked member of the running generation.
  absl::Status CheckReporterLocked(const v1::StepReport& r) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckKvRequestLocked(const std::string& job_id, uint64_t generation) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counters at 0 and zeroshard_build_info, once at construction.
  void UpdateGaugesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CoreOptions options_;
  const JobLimits limits_;
  std::unique_ptr<DurableState> durable_;
  const Clock* clock_;

  mutable absl::Mutex mu_;
  // Held while a call's effects are applied, in ticket order (core_effects.h);
  // never held while taking mu_.
  absl::Mutex apply_mu_ ABSL_ACQUIRED_AFTER(mu_);
  CoreEffects effects_ ABSL_GUARDED_BY(mu_);                 // Decided by the call holding mu_.
  uint64_t effects_issued_ ABSL_GUARDED_BY(mu_) = 0;         // Tickets handed out.
  uint64_t effects_applied_ ABSL_GUARDED_BY(apply_mu_) = 0;  // The last applied.
  // The scoped lock of every call that may decide effects: locks mu_; at the
  // end, applies the call's effects in lock order (after releasing mu_,
  // except a job's end: before).
  class ABSL_SCOPED_LOCKABLE EffectsLock {
   public:
    explicit EffectsLock(CoordinatorCore* core) ABSL_EXCLUSIVE_LOCK_FUNCTION(core->mu_);
    ~EffectsLock() ABSL_UNLOCK_FUNCTION();
    EffectsLock(const EffectsLock&) = delete;
    EffectsLock& operator=(const EffectsLock&) = delete;

   private:
    CoordinatorCore* const core_;
  };
  Membership membership_ ABSL_GUARDED_BY(mu_);
  KvStore kv_ ABSL_GUARDED_BY(mu_);
  KvWaiters waiters_ ABSL_GUARDED_BY(mu_);
  // Ends every parked wait after a generation change or shutdown.
  void EndWaitsLocked(const absl::Status& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  TrainingState training_ ABSL_GUARDED_BY(mu_);
  std::string job_config_json_ ABSL_GUARDED_BY(mu_);
  std::vector<UnitSpec> units_ ABSL_GUARDED_BY(mu_);
  bool units_known_ ABSL_GUARDED_BY(mu_) = false;
  v1::ShardPlan plan_ ABSL_GUARDED_BY(mu_);  // For the running generation.
  uint64_t change_number_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t generation_changes_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_requested_ ABSL_GUARDED_BY(mu_) = false;  // StopJob was called.
  struct CompletionClaims {
    uint64_t generation = 0;     // The generation whose ranks claim.
    std::set<uint64_t> ranks;    // Its ranked members' ids.
    std::set<uint64_t> claimed;  // Those that left with job_completed.
  };
  CompletionClaims completion_ ABSL_GUARDED_BY(mu_);
  // Unix ns of the last Tick; atomic so /healthz can read it without the
  // lock a wedged core would hold.
  std::atomic<int64_t> last_tick_ns_{0};

  // Every metric family of the core (core_metrics.h).
  CoreMetrics metrics_;
  struct MemberLabels {
    std::string hostname;  // JoinRequest.hostname
    std::string pod;       // JoinRequest.pod
  };
  std::map<uint64_t, MemberLabels> member_labels_ ABSL_GUARDED_BY(mu_);  // By member id.
  void RememberLabelsLocked(uint64_t member_id, const v1::JoinRequest& r)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Rebuilds rank_info for the running generation (none while waiting).
  void UpdateRankInfoLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The last rank lost to a failure, and the first failure report of each
  // generation (which names the collective the survivors were in).
  v1::LostRank last_lost_ ABSL_GUARDED_BY(mu_);
  uint64_t report_generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::string first_report_ ABSL_GUARDED_BY(mu_);
  void NoteLostLocked(const MembershipEvent& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetLostReportLocked(const std::string& report) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NoteReportLocked(uint64_t generation, const std::string& report)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
};

}  // namespace zeroshard::server
