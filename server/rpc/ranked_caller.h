// Rank binding of writes (issue 40, least privilege inside the job): the
// rank of the running generation a write acts as. A worker token lets its
// holder join; what a member may then write is only its own rank's: its
// rendezvous keys (server/kv/kv_owner.h) and its shard of a checkpoint of
// the running generation. A member waiting for a generation writes nothing.
//
// Thread safety: thread-safe (the core locks).
#pragma once

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/server_context.h"
#include "server/core/coordinator_core.h"
#include "server/rpc/auth_gate.h"

namespace zeroshard::server {

// The ranked members the call proves it is (x-zeroshard-member; one
// process may carry several, as in tests), or nullopt when it acts for
// every rank: an admin token while tokens are required. ABORTED naming
// `method` when it proves live members without a rank in a running
// generation (waiting, or their generation ended); PERMISSION_DENIED when
// it proves no live member.
absl::StatusOr<std::optional<std::vector<CoordinatorCore::RankedMember>>> RankedCallers(
    const AuthGate& gate, const CoordinatorCore& core, const grpc::ServerContextBase& ctx,
    absl::string_view method);

// KvSet / KvAdd (`add`): OK when the caller may write `key` (relative to
// the generation's prefix) of `generation` (server/kv/kv_owner.h);
// PERMISSION_DENIED naming the key's owner and the caller's rank otherwise.
// A request for another generation passes here and gets the core's ABORTED.
absl::Status CheckKvWriter(const AuthGate& gate, const CoordinatorCore& core,
                           const grpc::ServerContextBase& ctx, absl::string_view method,
                           uint64_t generation, absl::string_view key, bool add);

}  // namespace zeroshard::server
