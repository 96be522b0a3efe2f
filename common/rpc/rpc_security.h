// How zeroshard's gRPC channels and servers are secured: the one place that
// turns TLS files and a bearer token into gRPC credentials (every channel
// to the coordinator and the coordinator's own port go through here).
//
// TLS: PEM files, watched by gRPC's FileWatcherCertificateProvider and
// re-read every kTlsRefreshSeconds, so rotated files take effect for new
// connections without a restart (replace them atomically, e.g. by rename).
// A server with `ca` requires and verifies client certificates (mTLS).
//
// Metadata every call carries (added by a channel interceptor, so it works
// over plaintext too):
//   authorization: Bearer <token>       the token from --token-file;
//   x-zeroshard-member: <id>:<secret>   each member credential this client
//                                       got from Join (JoinResponse.member_secret).
//
// Thread safety: CallIdentity is thread-safe; the functions are pure.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace zeroshard {

inline constexpr char kAuthorizationHeader[] = "authorization";
inline constexpr char kMemberHeader[] = "x-zeroshard-member";
// Environment variable naming the client's token file when --token-file is not given.
inline constexpr char kTokenFileEnv[] = "ZEROSHARD_TOKEN_FILE";
// Join's refusal (PERMISSION_DENIED) of a worker_id that a live member
// holds names it with this phrase; IsWorkerIdHeld tells it from other
// refusals, so a restarted worker can retry until the old lease lapses.
inline constexpr char kWorkerIdHeldPhrase[] = "is held by live member";
bool IsWorkerIdHeld(const absl::Status& status);
// How often watched certificate files are re-read, seconds.
inline constexpr unsigned kTlsRefreshSeconds = 1;

// PEM file paths; all empty = plaintext.
struct TlsFiles {
  std::string ca;    // Roots that verify the peer. Server: set = client certificates required.
  std::string cert;  // Own certificate chain (server: required with TLS; client: for mTLS).
  std::string key;   // Private key of `cert`.
  bool enabled() const { return !ca.empty() || !cert.empty() || !key.empty(); }
};

// A client's side: TLS files and its token file ("" = $ZEROSHARD_TOKEN_FILE,
// else no token). Never the token itself: a flag value shows in `ps`.
struct ClientSecurity {
  TlsFiles tls;
  std::string token_file;
  // Allow a token in the clear to a host that is not loopback (OpenChannel
  // refuses that otherwise).
  bool insecure = false;
};

// The credentials one client presents on every call. Join results add a
// member credential (the newest kMaxMemberCredentials are kept).
class CallIdentity {
 public:
  static constexpr size_t kMaxMemberCredentials = 64;
  explicit CallIdentity(std::string token) : token_(std::move(token)) {}
  const std::string& token() const { return token_; }
  void AddMember(uint64_t member_id, const std::string& secret);
  std::vector<std::string> MemberCredentials() const;  // "<id>:<secret>" each.

 private:
  const std::string token_;
  mutable absl::Mutex mu_;
  std::vector<std::string> members_ ABSL_GUARDED_BY(mu_);
};

// The token of a client token file: the first line that is neither empty
// nor a comment (#); of a "role token" line (the coordinator's format), the
// token. INVALID_ARGUMENT naming the file if unreadable, open to other users
// (common/infra/secret_file.h) or without a token.
absl::StatusOr<std::string> ReadClientToken(const std::string& path);

// An identity with `security`'s token (from its token file, else
// $ZEROSHARD_TOKEN_FILE's, else none). Errors: ReadClientToken's.
absl::StatusOr<std::shared_ptr<CallIdentity>> NewCallIdentity(const ClientSecurity& security);

// A channel to `target` with `security`'s TLS and an identity (null = a
// NewCallIdentity(security); one may be passed to share one, e.g. between a worker's
// coordinator and checkpoint clients). INVALID_ARGUMENT naming a missing or
// unreadable file; FAILED_PRECONDITION for a token that would go in the
// clear (no TLS) to a host that is not loopback (common/infra/loopback.h), unless
// security.insecure.
absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenChannel(
    const std::string& target, const ClientSecurity& security, const grpc::ChannelArguments& args,
    std::shared_ptr<CallIdentity> identity = nullptr);

// Server credentials for `tls` (insecure when !tls.enabled()).
// INVALID_ARGUMENT naming what is missing (cert without key, ...) or unreadable.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const TlsFiles& tls);

}  // namespace zeroshard
