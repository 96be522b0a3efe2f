#include "common/infra/metrics.h"

#include <cmath>

#include "common/status_macros.h"
#include "prometheus/check_names.h"
#include "prometheus/text_serializer.h"

namespace zeroshard {

MetricFamily::Series& MetricFamily::SeriesFor(const LabelValues& labels) {
  ZS_CHECK(labels.size() == label_names_.size());
  auto it = series_.find(labels);
  if (it != series_.end()) return it->second;
  prometheus::Labels named;
  for (size_t i = 0; i < labels.size(); ++i) named[label_names_[i]] = labels[i];
  Series s;
  switch (type_) {
    case Type::kCounter:
      s.counter = &counters_->Add(named);
      break;
    case Type::kGauge:
      s.gauge = &gauges_->Add(named);
      break;
    case Type::kHistogram:
      s.histogram = &histograms_->Add(named, buckets_);
      break;
  }
  return series_.emplace(labels, s).first->second;
}

void MetricFamily::RemoveLocked(const Series& s) {
  if (s.counter != nullptr) counters_->Remove(s.counter);
  if (s.gauge != nullptr) gauges_->Remove(s.gauge);
  if (s.histogram != nullptr) histograms_->Remove(s.histogram);
}

void MetricFamily::Add(const LabelValues& labels, double by) {
  ZS_CHECK(type_ != Type::kHistogram);
  if (type_ == Type::kCounter && !(by >= 0)) return;
  absl::MutexLock lock(&mu_);
  Series& s = SeriesFor(labels);
  if (s.counter != nullptr) {
    s.counter->Increment(by);
  } else {
    s.gauge->Increment(by);
  }
}

void MetricFamily::Set(const LabelValues& labels, double value) {
  ZS_CHECK(type_ != Type::kHistogram);
  absl::MutexLock lock(&mu_);
  Series& s = SeriesFor(labels);
  if (s.gauge != nullptr) {
    s.gauge->Set(value);
    return;
  }
  if (!(value >= 0)) return;  // A counter cannot hold a negative or NaN total.
  const double delta = value - s.counter->Value();
  if (delta < 0) {
    // A reset: the series restarts at 0 (a fresh prometheus::Counter).
    counters_->Remove(s.counter);
    prometheus::Labels named;
    for (size_t i = 0; i < labels.size(); ++i) named[label_names_[i]] = labels[i];
    s.counter = &counters_->Add(named);
    s.counter->Increment(value);
    return;
  }
  s.counter->Increment(delta);
}

void MetricFamily::Observe(const LabelValues& labels, double value) {
  ZS_CHECK(type_ == Type::kHistogram);
  if (std::isnan(value)) return;  // Not an observation of anything.
  absl::MutexLock lock(&mu_);
  SeriesFor(labels).histogram->Observe(value);
}

void MetricFamily::Remove(const LabelValues& labels) {
  absl::MutexLock lock(&mu_);
  auto it = series_.find(labels);
  if (it == series_.end()) return;
  RemoveLocked(it->second);
  series_.erase(it);
}

void MetricFamily::Clear() {
  absl::MutexLock lock(&mu_);
  for (const auto& [labels, s] : series_) RemoveLocked(s);
  series_.clear();
}

double MetricFamily::Value(const LabelValues& labels) const {
  absl::MutexLock lock(&mu_);
  auto it = series_.find(labels);
  if (it == series_.end()) return 0.0;
  if (it->second.counter != nullptr) return it->second.counter->Value();
  if (it->second.gauge != nullptr) return it->second.gauge->Value();
  return 0.0;
}

bool MetricFamily::Has(const LabelValues& labels) const {
  absl::MutexLock lock(&mu_);
  return series_.count(labels) > 0;
}

MetricsRegistry::MetricsRegistry() : registry_(std::make_shared<prometheus::Registry>()) {}

MetricFamily* MetricsRegistry::Declare(const std::string& name, const std::string& help,
                                       MetricFamily::Type type,
                                       std::vector<std::string> label_names,
                                       std::vector<double> buckets) {
  ZS_CHECK(prometheus::CheckMetricName(name));
  for (const std::string& l : label_names) {
    ZS_CHECK(prometheus::CheckLabelName(l) && l != "le");
  }
  for (size_t i = 0; i < buckets.size(); ++i) {
    ZS_CHECK(std::isfinite(buckets[i]) && (i == 0 || buckets[i] > buckets[i - 1]));
  }
  absl::MutexLock lock(&mu_);
  ZS_CHECK(families_.count(name) == 0);
  std::unique_ptr<MetricFamily> family(
      new MetricFamily(type, help, std::move(label_names), std::move(buckets)));
  switch (type) {
    case MetricFamily::Type::kCounter:
      family->counters_ = &prometheus::BuildCounter().Name(name).Help(help).Register(*registry_);
      break;
    case MetricFamily::Type::kGauge:
      family->gauges_ = &prometheus::BuildGauge().Name(name).Help(help).Register(*registry_);
      break;
    case MetricFamily::Type::kHistogram:
      family->histograms_ =
          &prometheus::BuildHistogram().Name(name).Help(help).Register(*registry_);
      break;
  }
  MetricFamily* raw = family.get();
  families_.emplace(name, std::move(family));
  return raw;
}

MetricFamily* MetricsRegistry::Counter(const std::string& name, const std::string& help,
                                       std::vector<std::string> label_names) {
  return Declare(name, help, MetricFamily::Type::kCounter, std::move(label_names), {});
}

MetricFamily* MetricsRegistry::Gauge(const std::string& name, const std::string& help,
                                     std::vector<std::string> label_names) {
  return Declare(name, help, MetricFamily::Type::kGauge, std::move(label_names), {});
}

MetricFamily* MetricsRegistry::Histogram(const std::string& name, const std::string& help,
                                         std::vector<double> buckets,
                                         std::vector<std::string> label_names) {
  return Declare(name, help, MetricFamily::Type::kHistogram, std::move(label_names),
                 std::move(buckets));
}

void MetricsRegistry::AddCollectable(std::shared_ptr<prometheus::Collectable> collectable) {
  absl::MutexLock lock(&mu_);
  collectables_.push_back(std::move(collectable));
}

std::string MetricsRegistry::Render() const {
  std::map<std::string, prometheus::MetricFamily> collected;
  for (prometheus::MetricFamily& f : registry_->Collect()) {
    std::string name = f.name;
    collected.emplace(std::move(name), std::move(f));
  }
  std::vector<prometheus::MetricFamily> families;
  absl::MutexLock lock(&mu_);
  // By name; prometheus-cpp leaves out a family without series, but its
  // HELP and TYPE still tell scrapers (and dashboard checks) it exists.
  for (const auto& [name, family] : families_) {
    auto it = collected.find(name);
    if (it != collected.end()) {
      families.push_back(std::move(it->second));
      continue;
    }
    prometheus::MetricFamily empty;
    empty.name = name;
    empty.help = family->help_;
    empty.type = family->type_ == MetricFamily::Type::kCounter ? prometheus::MetricType::Counter
                 : family->type_ == MetricFamily::Type::kGauge ? prometheus::MetricType::Gauge
                                                               : prometheus::MetricType::Histogram;
    families.push_back(std::move(empty));
  }
  for (const auto& c : collectables_) {
    for (prometheus::MetricFamily& f : c->Collect()) families.push_back(std::move(f));
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace zeroshard
