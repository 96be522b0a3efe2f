#include "server/rpc/auth_gate.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/rpc/rpc_security.h"
#include "common/status_macros.h"

namespace zeroshard::server {
namespace {

absl::string_view View(const grpc::string_ref& s) { return absl::string_view(s.data(), s.size()); }

// The call's "authorization: Bearer <token>", if it has one.
std::optional<absl::string_view> BearerToken(const grpc::ServerContextBase& ctx) {
  auto it = ctx.client_metadata().find(kAuthorizationHeader);
  constexpr absl::string_view kBearer = "Bearer ";
  if (it == ctx.client_metadata().end() || !absl::StartsWith(View(it->second), kBearer)) {
    return std::nullopt;
  }
  return View(it->second).substr(kBearer.size());
}

}  // namespace

absl::StatusOr<std::unique_ptr<AuthGate>> AuthGate::Create(const std::string& token_file,
                                                           std::function<bool(uint64_t)> is_live,
                                                           bool bind_worker_identity) {
  absl::flat_hash_map<std::string, Role> tokens;
  if (!token_file.empty()) {
    absl::StatusOr<absl::flat_hash_map<std::string, Role>> read = ReadTokenFile(token_file);
    if (!read.ok()) return read.status();
    tokens = *std::move(read);
  }
  return std::unique_ptr<AuthGate>(
      new AuthGate(std::move(tokens), std::move(is_live), bind_worker_identity));
}

AuthGate::AuthGate(absl::flat_hash_map<std::string, Role> tokens,
                   std::function<bool(uint64_t)> is_live, bool bind_worker_identity)
    : tokens_(std::move(tokens)),
      is_live_(std::move(is_live)),
      bind_worker_identity_(bind_worker_identity),
      key_(32, '\0') {
  ZS_CHECK(RAND_bytes(reinterpret_cast<unsigned char*>(key_.data()),
                      static_cast<int>(key_.size())) == 1);
}

std::string AuthGate::SecretFor(uint64_t member_id) const {
  const std::string message = absl::StrCat(member_id);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  ZS_CHECK(HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
                reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac,
                &mac_len) != nullptr);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(mac), mac_len));
}

std::vector<uint64_t> AuthGate::ProvenMembers(const grpc::ServerContextBase& ctx) const {
  std::vector<uint64_t> proven;
  auto [begin, end] = ctx.client_metadata().equal_range(kMemberHeader);
  for (auto it = begin; it != end; ++it) {
    const absl::string_view value = View(it->second);
    const size_t colon = value.find(':');
    uint64_t id = 0;
    if (colon == absl::string_view::npos || !absl::SimpleAtoi(value.substr(0, colon), &id))
      continue;
    const std::string want = SecretFor(id);
    const absl::string_view got = value.substr(colon + 1);
    if (got.size() == want.size() && CRYPTO_memcmp(got.data(), want.data(), want.size()) == 0) {
      proven.push_back(id);
    }
  }
  return proven;
}

bool AuthGate::Proves(const grpc::ServerContextBase& ctx, uint64_t member_id) const {
  const std::vector<uint64_t> proven = ProvenMembers(ctx);
  return std::find(proven.begin(), proven.end(), member_id) != proven.end();
}

bool AuthGate::ActsAsAdmin(const grpc::ServerContextBase& ctx) const {
  const std::optional<absl::string_view> token = BearerToken(ctx);
  if (tokens_.empty() || !token.has_value()) return false;
  auto role = tokens_.find(*token);
  return role != tokens_.end() && role->second == Role::kAdmin;
}

absl::StatusOr<Role> AuthGate::CheckToken(const grpc::ServerContextBase& ctx,
                                          const RpcPolicy& p) const {
  return CheckTokenValue(BearerToken(ctx), p);
}

absl::StatusOr<Role> AuthGate::CheckTokenValue(std::optional<absl::string_view> token,
                                               const RpcPolicy& p) const {
  if (tokens_.empty()) return Role::kAdmin;
  if (!token.has_value()) {
    return absl::UnauthenticatedError(
        absl::StrCat(p.method,
                     ": missing bearer token (metadata \"authorization: Bearer <token>\"; clients "
                     "read it from --token-file or $",
                     kTokenFileEnv, ")"));
  }
  auto role = tokens_.find(*token);
  if (role == tokens_.end()) {
    return absl::UnauthenticatedError(
        absl::StrCat(p.method, ": the bearer token is not in the coordinator's --token-file"));
  }
  if (role->second < p.role) {
    return absl::PermissionDeniedError(absl::StrCat(p.method, " needs role ", RoleName(p.role),
                                                    "; the token has role ",
                                                    RoleName(role->second)));
  }
  return role->second;
}

absl::Status AuthGate::AuthorizeToken(absl::string_view what, Role role,
                                      absl::string_view token) const {
  const std::string name(what);
  const RpcPolicy policy{name.c_str(), role, MemberRule::kNone};
  std::optional<absl::string_view> given;
  if (!token.empty()) given = token;
  return CheckTokenValue(given, policy).status();
}

absl::StatusOr<Role> AuthGate::Authorize(const grpc::ServerContextBase& ctx,
                                         absl::string_view method, uint64_t member_id) const {
  const RpcPolicy* p = FindPolicy(method);
  if (p == nullptr) {
    return absl::PermissionDeniedError(absl::StrCat(method, " has no access policy"));
  }
  absl::StatusOr<Role> role = CheckToken(ctx, *p);
  if (!role.ok()) return role.status();
  // Without tokens every caller gets admin's roles, never its member bypass.
  if (p->member == MemberRule::kNone || (tokens_required() && *role == Role::kAdmin)) return role;
  const std::vector<uint64_t> proven = ProvenMembers(ctx);
  if (p->member == MemberRule::kSelf) {
    if (std::find(proven.begin(), proven.end(), member_id) != proven.end()) return role;
    // A member id that is not live (its lease expired, or a restarted
    // coordinator never knew it): NOT_FOUND, as the core would say, tells
    // a worker to Join again. Answered here, so the call never reaches the
    // core even if the id becomes live meanwhile.
    if (member_id == 0) return role;  // Never a member: the core's INVALID_ARGUMENT.
    if (!is_live_(member_id)) {
      return absl::NotFoundError(
          absl::StrCat(p->method, ": member_id ", member_id, " is not a member; Join again"));
    }
    return absl::PermissionDeniedError(absl::StrCat(
        p->method, " acts as member ", member_id, " but carries no valid credential of it (",
        kMemberHeader, ": <member_id>:<JoinResponse.member_secret>)"));
  }
  for (uint64_t id : proven) {
    if (is_live_(id)) return role;
  }
  return absl::PermissionDeniedError(
      absl::StrCat(p->method, " is for members of the job: it needs a live member's credential (",
                   kMemberHeader, ": <member_id>:<JoinResponse.member_secret>)"));
}

}  // namespace zeroshard::server
