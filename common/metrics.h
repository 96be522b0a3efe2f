// A small metrics registry and a Prometheus text exposition writer (format
// 0.0.4: https://prometheus.io/docs/instrumenting/exposition_formats/).
// No Prometheus C++ client is packaged here, so this keeps to what the
// coordinator needs: counters, gauges and histograms, each a family of
// series keyed by label values.
//
// Naming follows Prometheus conventions: base units in the name (`_bytes`,
// `_seconds`), counters end in `_total`. Families are declared once and live
// as long as the registry; series appear on first use and can be removed
// (e.g. the ranks of a generation that ended).
//
// Thread safety: every method is safe to call from any thread.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace zeroshard {

using LabelValues = std::vector<std::string>;  // One value per label name, in order.

class MetricFamily {
 public:
  enum class Type { kCounter, kGauge, kHistogram };
  MetricFamily(std::string name, std::string help, Type type,
               std::vector<std::string> label_names, std::vector<double> buckets);

  // Counter: adds `by` (>= 0; negative is ignored as a bug guard).
  // Gauge: adds `by` (any sign).
  void Add(const LabelValues& labels, double by = 1.0);
  // Counter or gauge: sets the value. For a counter this is for mirroring a
  // cumulative total kept elsewhere (e.g. a worker's comm bytes); a smaller
  // value reads as a counter reset, which Prometheus handles.
  void Set(const LabelValues& labels, double value);
  // Histogram: records one observation.
  void Observe(const LabelValues& labels, double value);
  // Removes one series, or every series.
  void Remove(const LabelValues& labels);
  void Clear();
  // The current value of a counter or gauge series; 0 if absent.
  double Value(const LabelValues& labels) const;

  // Appends this family in text exposition format.
  void Render(std::string* out) const;

 private:
  struct Series {
    double value = 0;                  // Counter or gauge.
    std::vector<uint64_t> bucket_counts;  // Histogram: per bucket, not cumulative.
    uint64_t count = 0;
    double sum = 0;
  };
  Series& SeriesFor(const LabelValues& labels) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string LabelText(const LabelValues& values, const std::string& extra_name,
                        const std::string& extra_value) const;

  const std::string name_;
  const std::string help_;
  const Type type_;
  const std::vector<std::string> label_names_;
  const std::vector<double> buckets_;  // Upper bounds, ascending, without +Inf.
  mutable absl::Mutex mu_;
  std::map<LabelValues, Series> series_ ABSL_GUARDED_BY(mu_);
};

class MetricsRegistry {
 public:
  // Declares a family. The name must match [a-zA-Z_:][a-zA-Z0-9_:]* and be
  // new, and label names [a-zA-Z_][a-zA-Z0-9_]*; anything else is a
  // programming error (ZS_CHECK). Returned pointers live as long as the
  // registry.
  MetricFamily* Counter(const std::string& name, const std::string& help,
                        std::vector<std::string> label_names = {});
  MetricFamily* Gauge(const std::string& name, const std::string& help,
                      std::vector<std::string> label_names = {});
  // `buckets`: upper bounds, strictly ascending, finite; +Inf is implied.
  MetricFamily* Histogram(const std::string& name, const std::string& help,
                          std::vector<double> buckets,
                          std::vector<std::string> label_names = {});

  // Every family, sorted by name, in text exposition format.
  std::string Render() const;

 private:
  MetricFamily* Add(const std::string& name, const std::string& help, MetricFamily::Type type,
                    std::vector<std::string> label_names, std::vector<double> buckets);
  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<MetricFamily>> families_ ABSL_GUARDED_BY(mu_);
};

// Formats a sample value as Prometheus reads it: shortest round-trip
// decimal, "NaN", "+Inf" or "-Inf".
std::string FormatMetricValue(double v);

}  // namespace zeroshard
