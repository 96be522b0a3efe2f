#include "server/membership/membership.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/enum_words.h"
#include "common/status_macros.h"

namespace zeroshard::server {

const char* ChangeReasonName(ChangeReason reason) {
  return WordOf(kChangeReasonWords, reason).data();  // Literals: NUL-terminated.
}

// A lost member rather than a scale event (join, leave, handoff) or a start.
bool IsFailureReason(ChangeReason reason) {
  return reason == ChangeReason::kFailure || reason == ChangeReason::kLeaseExpired ||
         reason == ChangeReason::kRejoin;
}

constexpr EnumWords<GenerationState, 2> kGenerationStateWords{
    {{GenerationState::kWaiting, "WAITING"}, {GenerationState::kRunning, "RUNNING"}}};
constexpr EnumWords<JobState, 4> kJobStateWords{{{JobState::kWaiting, "waiting"},
                                                 {JobState::kRunning, "running"},
                                                 {JobState::kCompleted, "completed"},
                                                 {JobState::kFailed, "failed"}}};

// The tables' words are literals, so their views are NUL-terminated.
const char* GenerationStateName(GenerationState s) {
  return WordOf(kGenerationStateWords, s).data();
}

const char* JobStateName(JobState s) { return WordOf(kJobStateWords, s).data(); }

Membership::Membership(MembershipOptions options, MembershipStart start)
    : options_(options),
      generation_(start.last_generation),
      next_member_id_(start.member_id_base + 1),
      pending_reason_(start.first_reason),
      failures_(start.failures) {
  ZS_CHECK(options_.min_workers >= 1 && options_.max_workers >= options_.min_workers);
  if (start.ended == JobState::kCompleted || start.ended == JobState::kFailed) {
    ended_ = start.ended;
    ended_reason_ = std::move(start.ended_reason);
  }
}

JobState Membership::job_state() const {
  if (job_ended()) return ended_;
  return state_ == GenerationState::kRunning ? JobState::kRunning : JobState::kWaiting;
}

absl::StatusOr<uint64_t> Membership::Join(const std::string& worker_id, const std::string& host,
                                          absl::Time now) {
  if (job_ended()) {
    return absl::FailedPreconditionError(absl::StrCat("the job is ", JobStateName(ended_), " (",
                                                      ended_reason_, "); it admits no members"));
  }
  // A live member with the same worker_id is a restarted worker: the old
  // incarnation is gone, so it leaves before the new one joins.
  auto existing = by_worker_id_.find(worker_id);
  if (existing != by_worker_id_.end()) Remove(existing->second, ChangeReason::kRejoin, now);
  const uint64_t id = next_member_id_++;
  Member& m = members_[id];
  m.member_id = id;
  m.worker_id = worker_id;
  m.host = host;
  m.joined = now;
  m.last_heartbeat = now;
  by_worker_id_[worker_id] = id;
  last_change_ = now;
  if (state_ == GenerationState::kWaiting && !pending_reason_)
    pending_reason_ = ChangeReason::kJoin;
  return id;
}

absl::Status Membership::Heartbeat(uint64_t member_id, absl::Time now) {
  auto it = members_.find(member_id);
  if (it == members_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "member_id ", member_id,
        " is not a member (its lease expired, it left, or the coordinator restarted); Join again"));
  }
  it->second.last_heartbeat = std::max(it->second.last_heartbeat, now);
  auto suspect = suspects_.find(member_id);
  if (suspect != suspects_.end() && now >= suspect->second) {
    suspects_.erase(suspect);
    suspect_ranks_.erase(member_id);
  }
  return absl::OkStatus();
}

absl::Status Membership::Leave(uint64_t member_id, absl::Time now) {
  if (members_.count(member_id) == 0) {
    return absl::NotFoundError(absl::StrCat("member_id ", member_id, " is not a member"));
  }
  Remove(member_id, ChangeReason::kLeave, now);
  return absl::OkStatus();
}

absl::Status Membership::ReportFailure(uint64_t member_id, uint64_t generation,
                                       const std::string& detail, absl::Time now) {
  if (members_.count(member_id) == 0) {
    return absl::NotFoundError(absl::StrCat("member_id ", member_id, " is not a member"));
  }
  ZS_RETURN_IF_ERROR(CheckRunning(generation, "generation"));
  ZS_RETURN_IF_ERROR(CheckRanked(member_id, "report a failure"));
  // [Note: suspects after a failure]
  for (uint64_t id : ranked_) {
    if (id == member_id) continue;
    suspects_[id] = now;
    suspect_ranks_[id] = members_.at(id).rank;
  }
  EndGeneration(ChangeReason::kFailure, now, detail);
  return absl::OkStatus();
}

absl::Status Membership::Handoff(uint64_t member_id, uint64_t generation, absl::Time now,
                                 absl::Span<const int32_t> leaving_ranks) {
  if (members_.count(member_id) == 0) {
    return absl::NotFoundError(absl::StrCat("member_id ", member_id, " is not a member"));
  }
  ZS_RETURN_IF_ERROR(CheckRunning(generation, "generation"));
  ZS_RETURN_IF_ERROR(CheckRanked(member_id, "report a handoff"));
  ZS_RETURN_IF_ERROR(CheckLeavingRanks(member_id, leaving_ranks));
  // A leaver's Leave may arrive after the next Tick: without this mark the
  // next generation would rank it, and its Leave would end that one too.
  for (int rank : leaving_ranks) {
    Member& m = members_.at(ranked_[rank]);
    m.departing = true;
    m.departing_since = now;
  }
  EndGeneration(ChangeReason::kHandoff, now);
  last_change_ = now - options_.settle;  // The change has settled: form at the next Tick.
  return absl::OkStatus();
}

// Distinct ranks of the running generation, none the reporter's.
absl::Status Membership::CheckLeavingRanks(uint64_t member_id,
                                           absl::Span<const int32_t> leaving_ranks) const {
  std::vector<bool> seen(static_cast<size_t>(world_size()), false);
  for (int rank : leaving_ranks) {
    if (rank < 0 || rank >= world_size() || ranked_[rank] == member_id || seen[rank]) {
      return absl::InvalidArgumentError(
          absl::StrCat("leaving rank ", rank, " is not another rank of generation ", generation_,
                       " named once (world size ", world_size(), ", reporter's rank ",
                       members_.at(member_id).rank, ")"));
    }
    seen[rank] = true;
  }
  return absl::OkStatus();
}

// Only the ranks of the running generation were in its collectives: a
// waiting member cannot end it (and with it count a failure against the job).
absl::Status Membership::CheckRanked(uint64_t member_id, const char* what) const {
  if (members_.at(member_id).rank >= 0) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("member ", member_id,
                                                  " has no rank in generation ", generation_,
                                                  ": only its ranks may ", what));
}

void Membership::Complete(const std::string& reason, absl::Time now) {
  (void)now;
  if (!job_ended()) EndJob(JobState::kCompleted, reason);
}

void Membership::EndJob(JobState state, const std::string& reason) {
  ended_ = state;
  ended_reason_ = reason;
  suspects_.clear();
  suspect_ranks_.clear();
  events_.push_back({MembershipEvent::Kind::kJobEnded, generation_, {}, 0, "", -1});
}

void Membership::CountFailure(ChangeReason reason, const std::string& detail) {
  if (job_ended() || !IsFailureReason(reason)) return;
  ++failures_;
  events_.push_back({MembershipEvent::Kind::kFailureCounted, generation_, reason, 0, "", -1});
  if (options_.max_failures >= 0 && failures_ > options_.max_failures) {
    EndJob(JobState::kFailed,
           absl::StrCat("failure ", failures_, " exceeds max_failures ", options_.max_failures,
                        " (last: generation ", generation_, " ended by ", ChangeReasonName(reason),
                        detail.empty() ? "" : ": ", detail, ")"));
  }
}

void Membership::ExpireSuspects(absl::Time now) {
  std::vector<uint64_t> silent;
  for (const auto& [id, reported] : suspects_) {
    if (now - reported >= options_.suspect_grace) silent.push_back(id);
  }
  // The settle clock started at the report; removing the silent members it
  // was waiting for must not restart it.
  const absl::Time settle_from = last_change_;
  for (uint64_t id : silent) Remove(id, ChangeReason::kFailure, now);
  if (!silent.empty()) last_change_ = settle_from;
}

absl::Status Membership::CheckRunning(uint64_t generation, const char* field) const {
  if (state_ == GenerationState::kRunning && generation == generation_) return absl::OkStatus();
  return absl::AbortedError(absl::StrCat(
      field, " ", generation, " is not the running generation; current generation: ", generation_,
      " (", GenerationStateName(state_), ")"));
}

void Membership::Remove(uint64_t member_id, ChangeReason reason, absl::Time now) {
  auto it = members_.find(member_id);
  if (it == members_.end()) return;
  const bool ranked = it->second.rank >= 0;
  const bool departing = it->second.departing;
  MembershipEvent removed{MembershipEvent::Kind::kMemberRemoved,
                          generation_,
                          reason,
                          member_id,
                          it->second.worker_id,
                          it->second.rank};
  if (!ranked && suspect_ranks_.count(member_id) > 0) removed.rank = suspect_ranks_[member_id];
  by_worker_id_.erase(it->second.worker_id);
  members_.erase(it);
  suspects_.erase(member_id);
  suspect_ranks_.erase(member_id);
  events_.push_back(std::move(removed));
  // A departing member was already left out of the next generation: its
  // going changes nothing to settle.
  if (!departing) last_change_ = now;
  if (ranked) {
    EndGeneration(reason, now);
  } else if (state_ == GenerationState::kWaiting && !pending_reason_) {
    pending_reason_ = reason;
  }
}

void Membership::EndGeneration(ChangeReason reason, absl::Time now, const std::string& detail) {
  if (state_ != GenerationState::kRunning) return;
  for (uint64_t id : ranked_) {
    auto it = members_.find(id);
    if (it != members_.end()) it->second.rank = -1;
  }
  ranked_.clear();
  state_ = GenerationState::kWaiting;
  change_pending_since_ = absl::InfiniteFuture();
  pending_reason_ = reason;
  last_change_ = now;
  events_.push_back({MembershipEvent::Kind::kGenerationEnded, generation_, reason, 0, "", -1});
  CountFailure(reason, detail);
}

void Membership::Form(absl::Time now) {
  ++generation_;
  state_ = GenerationState::kRunning;
  ranked_.clear();
  // Deterministic ranks: join order, capped at max_workers.
  for (auto& [id, m] : members_) {
    if (static_cast<int>(ranked_.size()) >= options_.max_workers) break;
    if (m.departing) continue;
    m.rank = static_cast<int>(ranked_.size());
    ranked_.push_back(id);
  }
  events_.push_back({MembershipEvent::Kind::kGenerationFormed, generation_,
                     pending_reason_.value_or(ChangeReason::kJoin), 0, "", -1});
  pending_reason_.reset();
  (void)now;
}

void Membership::Tick(absl::Time now) {
  // Expire leases first: a silent member must not get a rank.
  std::vector<uint64_t> expired;
  for (const auto& [id, m] : members_) {
    if (now - m.last_heartbeat > options_.lease_timeout) expired.push_back(id);
  }
  for (uint64_t id : expired) Remove(id, ChangeReason::kLeaseExpired, now);
  ExpireSuspects(now);
  ExpireDepartures(now);
  if (job_ended()) return;  // No generation forms again.

  const bool settled = now - last_change_ >= options_.settle;
  if (state_ == GenerationState::kRunning) {
    const bool joiner_admissible = Eligible() > world_size() && world_size() < options_.max_workers;
    if (!joiner_admissible || !settled) return;
    if (!change_pending()) change_pending_since_ = now;
    if (now - change_pending_since_ < options_.handoff_grace) return;
    EndGeneration(ChangeReason::kJoin, now);
    last_change_ = now - options_.settle;  // Already settled: form right away.
  }
  if (state_ == GenerationState::kWaiting && suspects_.empty() &&
      Eligible() >= options_.min_workers && now - last_change_ >= options_.settle) {
    Form(now);
  }
}

// A departing member still heartbeating a lease after its mark did not
// leave (a worker that named it wrongly): it waits as a joiner again.
void Membership::ExpireDepartures(absl::Time now) {
  for (auto& [id, m] : members_) {
    if (!m.departing || now - m.departing_since <= options_.lease_timeout) continue;
    m.departing = false;
    last_change_ = now;
    if (state_ == GenerationState::kWaiting && !pending_reason_)
      pending_reason_ = ChangeReason::kJoin;
  }
}

int Membership::Eligible() const {
  return static_cast<int>(std::count_if(members_.begin(), members_.end(),
                                        [](const auto& m) { return !m.second.departing; }));
}

std::vector<MembershipEvent> Membership::TakeEvents() {
  std::vector<MembershipEvent> out;
  out.swap(events_);
  return out;
}

const Member* Membership::Find(uint64_t member_id) const {
  auto it = members_.find(member_id);
  return it == members_.end() ? nullptr : &it->second;
}

std::vector<const Member*> Membership::Ranked() const {
  std::vector<const Member*> out;
  for (uint64_t id : ranked_) out.push_back(&members_.at(id));
  return out;
}

std::vector<const Member*> Membership::Waiting() const {
  std::vector<const Member*> out;
  for (const auto& [id, m] : members_) {
    if (m.rank < 0) out.push_back(&m);
  }
  return out;
}

}  // namespace zeroshard::server
