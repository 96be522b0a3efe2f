// Who may call which coordinator RPC: bearer tokens with roles, and member
// credentials that bind a call to the member it names (issue 16).
//
// Roles are ordered reader < worker < admin; a role may call everything a
// lower one may. The policy (auth_policy.cc) names every RPC of the
// Coordinator and CheckpointService services:
//   reader: GetJobStatus, ListCheckpoints, GetCheckpoint, DownloadRange;
//   worker: membership, KV, step reports, generation reads, checkpoint
//           uploads and the checkpoint trigger poll;
//   admin:  RequestCheckpoint ("checkpoint now"), StopJob ("stop"), and
//           acting for any member.
// The coordinator's --token-file holds one "role token" per line ('#'
// starts a comment; tokens are 16..256 printable characters). Without a
// token file no token is needed and every role is granted.
//
// Member binding (with or without tokens): an RPC that names a member
// (Heartbeat, Leave, ReportFailure, ReportStep) must carry that member's
// credential "<member_id>:<secret>" in the x-zeroshard-member header (a
// member id that is not live gets NOT_FOUND: Join again); KV reads must
// carry a live member's credential, KV writes and checkpoint writes the credential of a member with
// a rank in the running generation, and write only what that rank owns (ranked_caller.h). An admin
// token acts for any member and rank. The secret is HMAC-SHA256(key, member_id) under a key drawn
// at start, so it needs no table and dies with the process.
//
// Errors: UNAUTHENTICATED naming the missing or unknown token;
// PERMISSION_DENIED naming the role needed or the member credential missing;
// NOT_FOUND for a member id (MemberRule::kSelf) that is not live.
// Thread safety: const methods are thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/rpc/rpc_security.h"
#include "grpcpp/server_context.h"

namespace zeroshard::server {

enum class Role { kReader = 1, kWorker = 2, kAdmin = 3 };
const char* RoleName(Role role);

// Which member, if any, a call must prove it is.
enum class MemberRule {
  kNone,       // No member credential needed.
  kSelf,       // The member the request names (its member_id field).
  kAnyMember,  // Any live member (KV reads: peer addresses, the NCCL id).
  // A member with a rank in the running generation, and the write is bound
  // to that rank (ranked_caller.h): KV writes, checkpoint writes. The gate
  // checks it as kAnyMember; the guarded service checks the rank.
  kRank,
};

struct RpcPolicy {
  const char* method;  // "<Service>/<Rpc>", e.g. "Coordinator/Join".
  Role role;
  MemberRule member;
};

// Every RPC's policy; nullptr for a method the table lacks (refused).
const RpcPolicy* FindPolicy(absl::string_view method);
const std::vector<RpcPolicy>& AllPolicies();

// The token file's entries. INVALID_ARGUMENT naming the file and line.
absl::StatusOr<absl::flat_hash_map<std::string, Role>> ReadTokenFile(const std::string& path);

// The coordinator's side of rpc_security.h, from its flags.
struct ServerSecurity {
  TlsFiles tls;            // --tls-cert, --tls-key, --tls-ca (mTLS when ca is set).
  std::string token_file;  // --token-file: "role token" lines; "" = no tokens.
  bool insecure = false;   // --insecure: allow a non-loopback address without TLS and tokens.
  // --worker-identity cert: a Join's worker_id must be an identity of the
  // caller's client certificate (a DNS or URI subjectAltName, or the
  // subject's CN), so a stolen worker token without that certificate joins
  // nothing, and no certificate takes another worker's id. Needs --tls-ca.
  bool bind_worker_identity = false;
};

// Safe defaults: a `listen` address that is not loopback (127.0.0.0/8,
// localhost, ::1) needs TLS and tokens, or `insecure` (then a warning goes
// to stderr). INVALID_ARGUMENT naming the address and what is missing.
absl::Status CheckExposure(const std::string& listen, const ServerSecurity& security);

class AuthGate {
 public:
  // `token_file` "" = no tokens required. `is_live(member_id)` says whether
  // a member is live (for MemberRule::kAnyMember); it must outlive the gate.
  static absl::StatusOr<std::unique_ptr<AuthGate>> Create(const std::string& token_file,
                                                          std::function<bool(uint64_t)> is_live,
                                                          bool bind_worker_identity = false);

  // The caller's role for `method` (admin when tokens are off), after the
  // token and member checks; `member_id` is the id the request names
  // (MemberRule::kSelf).
  absl::StatusOr<Role> Authorize(const grpc::ServerContextBase& ctx, absl::string_view method,
                                 uint64_t member_id = 0) const;
  // For a call outside gRPC (local reads, local_read_server.h): OK when
  // `token` ("" = none) has role `role` or above (any token when tokens are
  // off); CheckToken's errors otherwise, naming `what`.
  absl::Status AuthorizeToken(absl::string_view what, Role role, absl::string_view token) const;
  // Whether the call carries a valid credential of `member_id`.
  bool Proves(const grpc::ServerContextBase& ctx, uint64_t member_id) const;
  // Member ids with a valid credential on the call.
  std::vector<uint64_t> ProvenMembers(const grpc::ServerContextBase& ctx) const;
  // Whether the call carries an admin token (tokens required): it acts for
  // any member and any rank.
  bool ActsAsAdmin(const grpc::ServerContextBase& ctx) const;
  // The secret Join hands member `member_id` (64 hex characters).
  std::string SecretFor(uint64_t member_id) const;
  bool tokens_required() const { return !tokens_.empty(); }
  // Join's identity check (ServerSecurity::bind_worker_identity): OK when
  // off, for an admin, or when `worker_id` is one of the client
  // certificate's identities; PERMISSION_DENIED naming them otherwise.
  absl::Status CheckWorkerIdentity(const grpc::ServerContextBase& ctx,
                                   absl::string_view worker_id) const;

 private:
  AuthGate(absl::flat_hash_map<std::string, Role> tokens, std::function<bool(uint64_t)> is_live,
           bool bind_worker_identity);
  absl::StatusOr<Role> CheckToken(const grpc::ServerContextBase& ctx, const RpcPolicy& p) const;
  absl::StatusOr<Role> CheckTokenValue(std::optional<absl::string_view> token,
                                       const RpcPolicy& p) const;

  const absl::flat_hash_map<std::string, Role> tokens_;
  const std::function<bool(uint64_t)> is_live_;
  const bool bind_worker_identity_;
  std::string key_;  // HMAC key, 32 random bytes.
};

}  // namespace zeroshard::server
