// gRPC's certificate file watcher (FileWatcherCertificateProvider) hands
// whatever it reads to its TLS stack, and an empty or half-written key file
// aborts the process inside gRPC ("assertion failed: !cert_pair_list[i].
// private_key().empty()"), which a non-atomic `cp` over the key during a
// rotation can cause. So gRPC never watches the user's files: it watches
// private copies that this code replaces only with a set it has validated
// with OpenSSL (every certificate parses, the key parses and matches the
// leaf certificate, the CA file holds a certificate). A set that fails keeps
// the previous copies in place, prints one line and counts a refused reload
// (zeroshard_tls_reloads_total{result="refused"}); a valid one replaces
// them (result="applied") and gRPC picks it up at its next refresh.
//
// The copies live in a private directory (mode 0700) under $TMPDIR, removed
// when the process exits normally (a killed process leaves it); one thread
// polls every mirrored set each kTlsRefreshSeconds. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "common/rpc/rpc_security.h"

namespace zeroshard {

// The private copies' paths for `source` (fields empty in `source` stay
// empty), watched from now on; the same paths for the same source again.
// Errors: INVALID_ARGUMENT naming the file and what is wrong with it when
// the set is not valid now; INTERNAL when the copies cannot be written.
absl::StatusOr<TlsFiles> MirrorTlsFiles(const TlsFiles& source);

// Whether the PEM texts form a valid set (as above); "" if so, else why.
std::string ValidateTlsSet(const std::string& ca, const std::string& cert, const std::string& key);

// Why the certificates served now would be refused by their peers: ""
// when they are fine (or nothing is mirrored), else "tls: <file> expired
// at <time>" (or is not valid yet). Read by the coordinator's /healthz, so
// that it tells the truth about TLS being served.
std::string TlsServingProblem();

// Changed TLS file sets this process applied or refused, every mirror
// together (the coordinator exports them as zeroshard_tls_reloads_total,
// server/rpc/tls_reload_metrics.h).
struct TlsReloadCounts {
  int64_t applied = 0;
  int64_t refused = 0;
};
TlsReloadCounts TlsReloads();

}  // namespace zeroshard
