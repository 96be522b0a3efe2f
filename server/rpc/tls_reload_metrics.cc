#include "server/rpc/tls_reload_metrics.h"

#include <utility>
#include <vector>

#include "common/rpc/tls_mirror.h"
#include "prometheus/family.h"

namespace zeroshard {
namespace {

class ReloadCollectable final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    prometheus::MetricFamily f;
    f.name = "zeroshard_tls_reloads_total";
    f.help =
        "Changed TLS certificate/key/CA files: applied (valid, handed to gRPC) or refused "
        "(empty, partial or mismatched: the previous ones kept).";
    f.type = prometheus::MetricType::Counter;
    const TlsReloadCounts counts = TlsReloads();
    for (auto [result, n] :
         {std::pair{"applied", counts.applied}, std::pair{"refused", counts.refused}}) {
      prometheus::ClientMetric m;
      m.label.push_back({"result", result});
      m.counter.value = static_cast<double>(n);
      f.metric.push_back(m);
    }
    return {f};
  }
};

}  // namespace

std::shared_ptr<prometheus::Collectable> TlsReloadMetrics() {
  return std::make_shared<ReloadCollectable>();
}

}  // namespace zeroshard
