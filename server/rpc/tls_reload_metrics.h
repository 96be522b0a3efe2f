// zeroshard_tls_reloads_total{result="applied"|"refused"}: the changed TLS
// file sets the process's mirrors applied or refused (common/rpc/
// tls_mirror.h TlsReloads), read at each scrape, for the coordinator's
// /metrics registry. Thread-safe: Collect keeps no state.
#pragma once

#include <memory>

#include "prometheus/collectable.h"

namespace zeroshard {

std::shared_ptr<prometheus::Collectable> TlsReloadMetrics();

}  // namespace zeroshard
