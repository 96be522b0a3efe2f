// AuthGate::CheckWorkerIdentity (auth_gate.h): with --worker-identity cert,
// a worker joins only under a name its client certificate carries.
#include <grpc/grpc_security_constants.h>

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/rpc/auth_gate.h"

namespace zeroshard::server {
namespace {

// The DNS/URI/IP subjectAltNames and the CN of the caller's verified
// client certificate (empty without one).
std::vector<std::string> CertificateIdentities(const grpc::ServerContextBase& ctx) {
  std::vector<std::string> out;
  const std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return out;
  for (const char* property : {GRPC_X509_SAN_PROPERTY_NAME, GRPC_X509_CN_PROPERTY_NAME}) {
    for (const grpc::string_ref& v : auth->FindPropertyValues(property)) {
      out.emplace_back(v.data(), v.size());
    }
  }
  return out;
}

}  // namespace

absl::Status AuthGate::CheckWorkerIdentity(const grpc::ServerContextBase& ctx,
                                           absl::string_view worker_id) const {
  if (!bind_worker_identity_ || ActsAsAdmin(ctx)) return absl::OkStatus();
  const std::vector<std::string> names = CertificateIdentities(ctx);
  for (const std::string& name : names) {
    if (name == worker_id) return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat("worker_id \"", absl::CEscape(worker_id.substr(0, 128)),
                   "\" is not an identity of the client certificate (--worker-identity cert; its "
                   "subjectAltNames and CN: ",
                   names.empty() ? std::string("none, no verified certificate")
                                 : absl::CEscape(absl::StrJoin(names, ", ")),
                   ")"));
}

}  // namespace zeroshard::server
