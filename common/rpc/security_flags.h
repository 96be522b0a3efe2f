// The command-line flags of rpc_security.h, declared once for every binary
// that dials the coordinator (zeroshard-worker, `zeroshard status`,
// `zeroshard checkpoint`, `zeroshard launch`) or serves it.
#pragma once

#include "CLI/CLI.hpp"
#include "common/rpc/rpc_security.h"

namespace zeroshard {

// --tls-ca, --tls-cert, --tls-key (PEM files) and --token-file for a client.
void AddClientSecurityFlags(CLI::App& app, ClientSecurity* security);

// --tls-cert, --tls-key, --tls-ca (client certificates required when given)
// for a server.
void AddServerTlsFlags(CLI::App& app, TlsFiles* tls);

}  // namespace zeroshard
