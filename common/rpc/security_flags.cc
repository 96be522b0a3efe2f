#include "common/rpc/security_flags.h"

namespace zeroshard {

void AddClientSecurityFlags(CLI::App& app, ClientSecurity* security) {
  app.add_option("--tls-ca", security->tls.ca,
                 "PEM file of the CA that signed the coordinator's certificate (turns TLS on)")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-cert", security->tls.cert,
                 "PEM client certificate for mTLS (with --tls-key)")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-key", security->tls.key, "PEM private key of --tls-cert")
      ->check(CLI::ExistingFile);
  app.add_option("--token-file", security->token_file,
                 "file holding the bearer token (default: $ZEROSHARD_TOKEN_FILE; the first "
                 "non-comment line, `token` or `role token`)")
      ->check(CLI::ExistingFile);
  app.add_flag("--insecure", security->insecure,
               "send the token without TLS to an address that is not loopback (it can be read "
               "on the way)");
}

void AddServerTlsFlags(CLI::App& app, TlsFiles* tls) {
  app.add_option("--tls-cert", tls->cert, "PEM server certificate chain (turns TLS on)")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-key", tls->key, "PEM private key of --tls-cert")->check(CLI::ExistingFile);
  app.add_option("--tls-ca", tls->ca,
                 "PEM CA that client certificates must chain to (requires them: mTLS)")
      ->check(CLI::ExistingFile);
}

}  // namespace zeroshard
