// CheckExposure (auth_gate.h): the coordinator refuses to serve a
// non-loopback address in the clear unless told to (--insecure).
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/rpc/auth_gate.h"

namespace zeroshard::server {
namespace {

bool IsLoopbackHost(absl::string_view host) {
  if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]")) host = host.substr(1, host.size() - 2);
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

}  // namespace

absl::Status CheckExposure(const std::string& listen, const ServerSecurity& security) {
  const size_t colon = listen.rfind(':');
  const absl::string_view host =
      absl::string_view(listen).substr(0, colon == std::string::npos ? listen.size() : colon);
  if (IsLoopbackHost(host)) return absl::OkStatus();
  std::string missing;
  if (!security.tls.enabled()) missing = "--tls-cert/--tls-key";
  if (security.token_file.empty()) absl::StrAppend(&missing, missing.empty() ? "" : " and ", "--token-file");
  if (missing.empty()) return absl::OkStatus();
  if (!security.insecure) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen ", listen, " is not a loopback address: serving it needs ", missing,
        " (or --insecure to serve it anyway)"));
  }
  std::cerr << "zeroshard-coordinator: WARNING: --insecure: serving " << listen << " without "
            << missing << "; anyone who reaches the port controls the job\n";
  return absl::OkStatus();
}

}  // namespace zeroshard::server
