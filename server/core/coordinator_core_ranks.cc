// CoordinatorCore: the rank -> worker mapping (zeroshard_rank_info). Each
// member's hostname and pod come from its Join and are kept until it is
// removed; the metric holds one series per rank of the running generation
// and is rebuilt when a generation forms (cleared when one ends).
#include "absl/strings/str_cat.h"
#include "server/core/coordinator_core.h"

namespace zeroshard::server {

void CoordinatorCore::RememberLabelsLocked(uint64_t member_id, const v1::JoinRequest& r) {
  member_labels_[member_id] = MemberLabels{r.hostname(), r.pod()};
}

void CoordinatorCore::UpdateRankInfoLocked() {
  std::vector<RankLabels> ranks;
  if (membership_.state() == GenerationState::kRunning) {
    for (const Member* m : membership_.Ranked()) {
      RankLabels r{m->rank, m->worker_id, "", ""};
      if (auto it = member_labels_.find(m->member_id); it != member_labels_.end()) {
        r.hostname = it->second.hostname;
        r.pod = it->second.pod;
      }
      ranks.push_back(std::move(r));
    }
  }
  metrics_.SetRanks(ranks);
}

bool CoordinatorCore::IsLiveMember(uint64_t member_id) const {
  absl::MutexLock lock(&mu_);
  return membership_.Find(member_id) != nullptr;
}

std::optional<uint64_t> CoordinatorCore::LiveMemberOf(const std::string& worker_id) const {
  absl::MutexLock lock(&mu_);
  for (const auto& group : {membership_.Ranked(), membership_.Waiting()}) {
    for (const Member* m : group) {
      if (m->worker_id == worker_id) return m->member_id;
    }
  }
  return std::nullopt;
}

std::optional<CoordinatorCore::RankedMember> CoordinatorCore::RankOf(uint64_t member_id) const {
  absl::MutexLock lock(&mu_);
  const Member* m = membership_.Find(member_id);
  if (m == nullptr || m->rank < 0 || membership_.state() != GenerationState::kRunning) {
    return std::nullopt;
  }
  return RankedMember{member_id, membership_.generation(), m->rank, membership_.world_size(),
                      training_.step()};
}

}  // namespace zeroshard::server
