// CheckExposure (auth_gate.h): the coordinator refuses to serve a
// non-loopback address in the clear unless told to (--insecure).
#include <iostream>

#include "absl/strings/str_cat.h"
#include "common/infra/loopback.h"
#include "server/rpc/auth_gate.h"

namespace zeroshard::server {

absl::Status CheckExposure(const std::string& listen, const ServerSecurity& security) {
  if (security.bind_worker_identity && security.tls.ca.empty()) {
    return absl::InvalidArgumentError(
        "--worker-identity cert needs client certificates: give --tls-ca (mTLS)");
  }
  const size_t colon = listen.rfind(':');
  const absl::string_view host =
      absl::string_view(listen).substr(0, colon == std::string::npos ? listen.size() : colon);
  if (IsLoopbackHost(host)) return absl::OkStatus();
  std::string missing;
  if (!security.tls.enabled()) missing = "--tls-cert/--tls-key";
  if (security.token_file.empty())
    absl::StrAppend(&missing, missing.empty() ? "" : " and ", "--token-file");
  if (missing.empty()) return absl::OkStatus();
  if (!security.insecure) {
    return absl::InvalidArgumentError(absl::StrCat("--listen ", listen,
                                                   " is not a loopback address: serving it needs ",
                                                   missing, " (or --insecure to serve it anyway)"));
  }
  std::cerr << "zeroshard-coordinator: WARNING: --insecure: serving " << listen << " without "
            << missing << "; anyone who reaches the port controls the job\n";
  return absl::OkStatus();
}

}  // namespace zeroshard::server
