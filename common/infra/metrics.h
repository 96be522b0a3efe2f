// The coordinator's metrics: a thin layer over the Prometheus C++ client
// (prometheus-cpp: prometheus::Registry, Family<Counter/Gauge/Histogram>,
// and prometheus::TextSerializer for the text exposition format 0.0.4).
//
// What the layer adds over prometheus-cpp, and nothing more:
//   - series addressed by label values in the order the family declared its
//     label names (`{"3", "all_gather"}`), instead of name/value maps;
//   - Set on a counter, for mirroring a cumulative total kept elsewhere (a
//     worker's comm bytes): it increments by the delta, and a smaller value
//     is a reset (the series restarts at 0 and counts up to the value, which
//     Prometheus's rate() reads as a counter reset);
//   - removing every series of a family at once (a generation ended);
//   - extra collectables (e.g. process metrics) serialised beside the
//     registry by Render.
//
// Naming follows Prometheus conventions: base units in the name (`_bytes`,
// `_seconds`), counters end in `_total`. Families are declared once and live
// as long as the registry; series appear on first use and can be removed. A
// family without series still shows its HELP and TYPE lines, no samples
// (so zeroshard_loss has no NaN sample before the first step).
//
// Thread safety: every method is safe to call from any thread.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace zeroshard {

using LabelValues = std::vector<std::string>;  // One value per label name, in order.

class MetricFamily {
 public:
  enum class Type { kCounter, kGauge, kHistogram };

  // Counter: adds `by` (>= 0; a negative or NaN `by` is ignored as a bug
  // guard). Gauge: adds `by` (any sign). Creates the series at 0 first, so
  // Add(labels, 0) pre-creates a series.
  void Add(const LabelValues& labels, double by = 1.0);
  // Gauge: sets the value. Counter: mirrors a cumulative total (see above).
  void Set(const LabelValues& labels, double value);
  // Histogram: records one observation (NaN is ignored).
  void Observe(const LabelValues& labels, double value);
  // Removes one series, or every series.
  void Remove(const LabelValues& labels);
  void Clear();
  // The current value of a counter or gauge series; 0 if absent.
  double Value(const LabelValues& labels) const;
  bool Has(const LabelValues& labels) const;

 private:
  friend class MetricsRegistry;
  struct Series {
    prometheus::Counter* counter = nullptr;
    prometheus::Gauge* gauge = nullptr;
    prometheus::Histogram* histogram = nullptr;
  };
  MetricFamily(Type type, std::string help, std::vector<std::string> label_names,
               std::vector<double> buckets)
      : type_(type),
        help_(std::move(help)),
        label_names_(std::move(label_names)),
        buckets_(std::move(buckets)) {}
  Series& SeriesFor(const LabelValues& labels) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveLocked(const Series& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Type type_;
  const std::string help_;
  const std::vector<std::string> label_names_;
  const std::vector<double> buckets_;  // Histogram upper bounds, without +Inf.
  // Exactly one is set, by type_; owned by the registry.
  prometheus::Family<prometheus::Counter>* counters_ = nullptr;
  prometheus::Family<prometheus::Gauge>* gauges_ = nullptr;
  prometheus::Family<prometheus::Histogram>* histograms_ = nullptr;
  mutable absl::Mutex mu_;
  std::map<LabelValues, Series> series_ ABSL_GUARDED_BY(mu_);
};

class MetricsRegistry {
 public:
  MetricsRegistry();
  // Declares a family. The name must be a valid Prometheus metric name and
  // new, the label names valid and not "le"; anything else is a programming
  // error (ZS_CHECK). Returned pointers live as long as the registry.
  MetricFamily* Counter(const std::string& name, const std::string& help,
                        std::vector<std::string> label_names = {});
  MetricFamily* Gauge(const std::string& name, const std::string& help,
                      std::vector<std::string> label_names = {});
  // `buckets`: upper bounds, strictly ascending, finite; +Inf is implied.
  MetricFamily* Histogram(const std::string& name, const std::string& help,
                          std::vector<double> buckets, std::vector<std::string> label_names = {});
  // Adds a collectable serialised after the registry's own families (e.g.
  // ProcessMetrics). Its names must not clash with declared families.
  void AddCollectable(std::shared_ptr<prometheus::Collectable> collectable);

  // Every declared family sorted by name, then the collectables, in text
  // exposition format 0.0.4 (prometheus::TextSerializer).
  std::string Render() const;
  // The underlying registry (e.g. for a prometheus::Exposer).
  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

 private:
  MetricFamily* Declare(const std::string& name, const std::string& help, MetricFamily::Type type,
                        std::vector<std::string> label_names, std::vector<double> buckets);
  const std::shared_ptr<prometheus::Registry> registry_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<MetricFamily>> families_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zeroshard
