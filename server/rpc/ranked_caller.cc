#include "server/rpc/ranked_caller.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "server/kv/kv_owner.h"

namespace zeroshard::server {

absl::StatusOr<std::optional<std::vector<CoordinatorCore::RankedMember>>> RankedCallers(
    const AuthGate& gate, const CoordinatorCore& core, const grpc::ServerContextBase& ctx,
    absl::string_view method) {
  if (gate.ActsAsAdmin(ctx)) return std::nullopt;
  std::vector<CoordinatorCore::RankedMember> ranked;
  uint64_t unranked = 0;
  for (uint64_t id : gate.ProvenMembers(ctx)) {
    if (std::optional<CoordinatorCore::RankedMember> r = core.RankOf(id)) {
      ranked.push_back(*r);
    } else if (core.IsLiveMember(id)) {
      unranked = id;
    }
  }
  if (!ranked.empty()) return ranked;
  // A live member between generations: the core's answer to a member of
  // an ended generation, which a worker takes as "go on to the next".
  if (unranked != 0) {
    return absl::AbortedError(absl::StrCat(method, ": member ", unranked,
                                           " has no rank in a running generation (now ",
                                           core.generation(), ")"));
  }
  return absl::PermissionDeniedError(
      absl::StrCat(method,
                   " writes as a rank of the running generation: the call proves no member that "
                   "holds one (",
                   kMemberHeader, ": <member_id>:<JoinResponse.member_secret>)"));
}

absl::Status CheckKvWriter(const AuthGate& gate, const CoordinatorCore& core,
                           const grpc::ServerContextBase& ctx, absl::string_view method,
                           uint64_t generation, absl::string_view key, bool add) {
  auto callers = RankedCallers(gate, core, ctx, method);
  if (!callers.ok()) return callers.status();
  if (!callers->has_value()) return absl::OkStatus();
  const std::optional<int> owner = KvKeyOwner(key);
  const bool shared = !KvKeyNamesRank(key);
  for (const CoordinatorCore::RankedMember& m : **callers) {
    if (m.generation != generation || m.rank == owner || (add && shared)) {
      return absl::OkStatus();
    }
  }
  return absl::PermissionDeniedError(absl::StrCat(
      method, ": key \"", absl::CEscape(key.substr(0, 64)), "\" is ",
      owner.has_value() ? absl::StrCat("rank ", *owner, "'s") : std::string("no rank's"),
      " (a last component <r> or rank_<r> names its rank; rank 0 sets the others, any rank "
      "adds to them); member ",
      (**callers)[0].member_id, " is rank ", (**callers)[0].rank));
}

}  // namespace zeroshard::server
