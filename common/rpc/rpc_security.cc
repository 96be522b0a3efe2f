#include "common/rpc/rpc_security.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/formats/atomic_file.h"
#include "common/infra/loopback.h"
#include "common/infra/secret_file.h"
#include "common/rpc/tls_mirror.h"
#include "common/status_macros.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"
#include "grpcpp/support/client_interceptor.h"

namespace zeroshard {
namespace {

namespace gx = grpc::experimental;

// Adds the identity's token and member credentials to each call's metadata.
class IdentityInterceptor final : public gx::Interceptor {
 public:
  explicit IdentityInterceptor(std::shared_ptr<CallIdentity> identity)
      : identity_(std::move(identity)) {}
  void Intercept(gx::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            gx::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      std::multimap<std::string, std::string>* md = methods->GetSendInitialMetadata();
      if (!identity_->token().empty()) {
        md->emplace(kAuthorizationHeader, absl::StrCat("Bearer ", identity_->token()));
      }
      for (std::string& c : identity_->MemberCredentials())
        md->emplace(kMemberHeader, std::move(c));
    }
    methods->Proceed();
  }

 private:
  std::shared_ptr<CallIdentity> identity_;
};

class IdentityInterceptorFactory final : public gx::ClientInterceptorFactoryInterface {
 public:
  explicit IdentityInterceptorFactory(std::shared_ptr<CallIdentity> identity)
      : identity_(std::move(identity)) {}
  gx::Interceptor* CreateClientInterceptor(gx::ClientRpcInfo*) override {
    return new IdentityInterceptor(identity_);
  }

 private:
  std::shared_ptr<CallIdentity> identity_;
};

// OK if `path` is a readable PEM file; INVALID_ARGUMENT naming `what` otherwise.
absl::Status CheckPemFile(const std::string& path, const char* what) {
  absl::StatusOr<std::string> text = ReadWholeFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": ", text.status().message()));
  }
  if (text->find("-----BEGIN ") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " is not a PEM file"));
  }
  return absl::OkStatus();
}

absl::Status CheckTlsFiles(const TlsFiles& tls, bool server) {
  if (tls.cert.empty() != tls.key.empty()) {
    return absl::InvalidArgumentError(tls.cert.empty() ? "--tls-key needs --tls-cert"
                                                       : "--tls-cert needs --tls-key");
  }
  if (server && tls.cert.empty())
    return absl::InvalidArgumentError("TLS needs --tls-cert and --tls-key");
  if (!server && tls.ca.empty()) {
    return absl::InvalidArgumentError("TLS to the coordinator needs --tls-ca (its CA)");
  }
  if (!tls.ca.empty()) ZS_RETURN_IF_ERROR(CheckPemFile(tls.ca, "--tls-ca"));
  if (!tls.cert.empty()) ZS_RETURN_IF_ERROR(CheckPemFile(tls.cert, "--tls-cert"));
  if (!tls.key.empty()) ZS_RETURN_IF_ERROR(CheckPemFile(tls.key, "--tls-key"));
  return absl::OkStatus();
}

std::shared_ptr<gx::FileWatcherCertificateProvider> Provider(const TlsFiles& tls) {
  return std::make_shared<gx::FileWatcherCertificateProvider>(tls.key, tls.cert, tls.ca,
                                                              kTlsRefreshSeconds);
}

}  // namespace

bool IsWorkerIdHeld(const absl::Status& status) {
  return absl::IsPermissionDenied(status) &&
         absl::StrContains(status.message(), kWorkerIdHeldPhrase);
}

void CallIdentity::AddMember(uint64_t member_id, const std::string& secret) {
  absl::MutexLock lock(&mu_);
  members_.push_back(absl::StrCat(member_id, ":", secret));
  if (members_.size() > kMaxMemberCredentials) members_.erase(members_.begin());
}

std::vector<std::string> CallIdentity::MemberCredentials() const {
  absl::MutexLock lock(&mu_);
  return members_;
}

absl::StatusOr<std::string> ReadClientToken(const std::string& path) {
  absl::StatusOr<std::string> text = ReadSecretFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--token-file ", text.status().message()));
  }
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    return std::string(fields.back());
  }
  return absl::InvalidArgumentError(absl::StrCat("--token-file ", path, " holds no token"));
}

absl::StatusOr<std::shared_ptr<CallIdentity>> NewCallIdentity(const ClientSecurity& security) {
  std::string file = security.token_file;
  if (file.empty() && std::getenv(kTokenFileEnv) != nullptr) file = std::getenv(kTokenFileEnv);
  std::string token;
  if (!file.empty()) {
    ZS_ASSIGN_OR_RETURN(token, ReadClientToken(file));
  }
  return std::make_shared<CallIdentity>(std::move(token));
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> OpenChannel(const std::string& target,
                                                           const ClientSecurity& security,
                                                           const grpc::ChannelArguments& args,
                                                           std::shared_ptr<CallIdentity> identity) {
  if (identity == nullptr) {
    ZS_ASSIGN_OR_RETURN(identity, NewCallIdentity(security));
  }
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!security.tls.enabled() && !identity->token().empty() && !security.insecure &&
      !IsLoopbackHost(HostOfTarget(target))) {
    return absl::FailedPreconditionError(
        absl::StrCat("refusing to send the token in the clear to ", target,
                     ": give --tls-ca (the coordinator's CA), or --insecure to send it anyway"));
  }
  if (security.tls.enabled()) {
    ZS_RETURN_IF_ERROR(CheckTlsFiles(security.tls, /*server=*/false));
    ZS_ASSIGN_OR_RETURN(const TlsFiles copies, MirrorTlsFiles(security.tls));
    gx::TlsChannelCredentialsOptions options;
    options.set_certificate_provider(Provider(copies));
    options.watch_root_certs();
    if (!security.tls.cert.empty()) options.watch_identity_key_cert_pairs();
    creds = gx::TlsCredentials(options);
  }
  std::vector<std::unique_ptr<gx::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<IdentityInterceptorFactory>(std::move(identity)));
  return gx::CreateCustomChannelWithInterceptors(target, creds, args, std::move(interceptors));
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& tls) {
  if (!tls.enabled()) return grpc::InsecureServerCredentials();
  ZS_RETURN_IF_ERROR(CheckTlsFiles(tls, /*server=*/true));
  // gRPC watches validated copies, never the files themselves (tls_mirror.h).
  ZS_ASSIGN_OR_RETURN(const TlsFiles copies, MirrorTlsFiles(tls));
  gx::TlsServerCredentialsOptions options(Provider(copies));
  options.watch_identity_key_cert_pairs();
  if (!tls.ca.empty()) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  }
  return gx::TlsServerCredentials(options);
}

}  // namespace zeroshard
