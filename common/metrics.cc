#include "common/metrics.h"

#include <charconv>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace zeroshard {
namespace {

bool ValidName(const std::string& s, bool allow_colon) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                       (allow_colon && c == ':');
    const bool digit = c >= '0' && c <= '9';
    if (!(alpha || (i > 0 && digit))) return false;
  }
  return true;
}

// Label values escape backslash, double quote and newline; HELP text
// escapes backslash and newline (exposition format 0.0.4).
std::string Escape(const std::string& s, bool quotes) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quotes && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

const char* TypeName(MetricFamily::Type t) {
  switch (t) {
    case MetricFamily::Type::kCounter: return "counter";
    case MetricFamily::Type::kGauge: return "gauge";
    case MetricFamily::Type::kHistogram: return "histogram";
  }
  return "untyped";
}

}  // namespace

std::string FormatMetricValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

MetricFamily::MetricFamily(std::string name, std::string help, Type type,
                           std::vector<std::string> label_names, std::vector<double> buckets)
    : name_(std::move(name)),
      help_(std::move(help)),
      type_(type),
      label_names_(std::move(label_names)),
      buckets_(std::move(buckets)) {}

MetricFamily::Series& MetricFamily::SeriesFor(const LabelValues& labels) {
  ZS_CHECK(labels.size() == label_names_.size());
  Series& s = series_[labels];
  if (type_ == Type::kHistogram && s.bucket_counts.empty()) {
    s.bucket_counts.assign(buckets_.size(), 0);
  }
  return s;
}

void MetricFamily::Add(const LabelValues& labels, double by) {
  ZS_CHECK(type_ != Type::kHistogram);
  if (type_ == Type::kCounter && !(by >= 0)) return;
  absl::MutexLock lock(&mu_);
  SeriesFor(labels).value += by;
}

void MetricFamily::Set(const LabelValues& labels, double value) {
  ZS_CHECK(type_ != Type::kHistogram);
  absl::MutexLock lock(&mu_);
  SeriesFor(labels).value = value;
}

void MetricFamily::Observe(const LabelValues& labels, double value) {
  ZS_CHECK(type_ == Type::kHistogram);
  if (std::isnan(value)) return;  // Not an observation of anything.
  absl::MutexLock lock(&mu_);
  Series& s = SeriesFor(labels);
  for (size_t i = 0; i < buckets_.size(); ++i) {
    if (value <= buckets_[i]) {
      ++s.bucket_counts[i];
      break;
    }
  }
  ++s.count;
  s.sum += value;
}

void MetricFamily::Remove(const LabelValues& labels) {
  absl::MutexLock lock(&mu_);
  series_.erase(labels);
}

void MetricFamily::Clear() {
  absl::MutexLock lock(&mu_);
  series_.clear();
}

double MetricFamily::Value(const LabelValues& labels) const {
  absl::MutexLock lock(&mu_);
  auto it = series_.find(labels);
  return it == series_.end() ? 0.0 : it->second.value;
}

std::string MetricFamily::LabelText(const LabelValues& values, const std::string& extra_name,
                                    const std::string& extra_value) const {
  std::string out;
  for (size_t i = 0; i < label_names_.size(); ++i) {
    absl::StrAppend(&out, out.empty() ? "" : ",", label_names_[i], "=\"",
                    Escape(values[i], true), "\"");
  }
  if (!extra_name.empty()) {
    absl::StrAppend(&out, out.empty() ? "" : ",", extra_name, "=\"", extra_value, "\"");
  }
  return out.empty() ? out : absl::StrCat("{", out, "}");
}

void MetricFamily::Render(std::string* out) const {
  absl::StrAppend(out, "# HELP ", name_, " ", Escape(help_, false), "\n");
  absl::StrAppend(out, "# TYPE ", name_, " ", TypeName(type_), "\n");
  absl::MutexLock lock(&mu_);
  for (const auto& [labels, s] : series_) {
    if (type_ != Type::kHistogram) {
      absl::StrAppend(out, name_, LabelText(labels, "", ""), " ", FormatMetricValue(s.value),
                      "\n");
      continue;
    }
    uint64_t cumulative = 0;
    for (size_t i = 0; i < buckets_.size(); ++i) {
      cumulative += s.bucket_counts[i];
      absl::StrAppend(out, name_, "_bucket",
                      LabelText(labels, "le", FormatMetricValue(buckets_[i])), " ", cumulative,
                      "\n");
    }
    absl::StrAppend(out, name_, "_bucket", LabelText(labels, "le", "+Inf"), " ", s.count, "\n");
    absl::StrAppend(out, name_, "_sum", LabelText(labels, "", ""), " ", FormatMetricValue(s.sum),
                    "\n");
    absl::StrAppend(out, name_, "_count", LabelText(labels, "", ""), " ", s.count, "\n");
  }
}

MetricFamily* MetricsRegistry::Add(const std::string& name, const std::string& help,
                                   MetricFamily::Type type, std::vector<std::string> label_names,
                                   std::vector<double> buckets) {
  ZS_CHECK(ValidName(name, /*allow_colon=*/true));
  for (const std::string& l : label_names) {
    ZS_CHECK(ValidName(l, /*allow_colon=*/false) && l != "le");
  }
  for (size_t i = 0; i < buckets.size(); ++i) {
    ZS_CHECK(std::isfinite(buckets[i]) && (i == 0 || buckets[i] > buckets[i - 1]));
  }
  absl::MutexLock lock(&mu_);
  ZS_CHECK(families_.count(name) == 0);
  auto family = std::make_unique<MetricFamily>(name, help, type, std::move(label_names),
                                               std::move(buckets));
  MetricFamily* raw = family.get();
  families_.emplace(name, std::move(family));
  return raw;
}

MetricFamily* MetricsRegistry::Counter(const std::string& name, const std::string& help,
                                       std::vector<std::string> label_names) {
  return Add(name, help, MetricFamily::Type::kCounter, std::move(label_names), {});
}

MetricFamily* MetricsRegistry::Gauge(const std::string& name, const std::string& help,
                                     std::vector<std::string> label_names) {
  return Add(name, help, MetricFamily::Type::kGauge, std::move(label_names), {});
}

MetricFamily* MetricsRegistry::Histogram(const std::string& name, const std::string& help,
                                         std::vector<double> buckets,
                                         std::vector<std::string> label_names) {
  return Add(name, help, MetricFamily::Type::kHistogram, std::move(label_names),
             std::move(buckets));
}

std::string MetricsRegistry::Render() const {
  std::string out;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, family] : families_) family->Render(&out);
  return out;
}

}  // namespace zeroshard
