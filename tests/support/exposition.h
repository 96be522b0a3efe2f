// Reads Prometheus text exposition (format 0.0.4) into samples, for tests
// that check metric values: a test's own small parser, independent of the
// client library that wrote the text.
//
// Each sample line "NAME{LABELS} VALUE" (or "NAME VALUE") becomes one entry
// keyed by "NAME{LABELS}" exactly as written (prometheus-cpp writes label
// names sorted); comment lines are skipped. Values parse with strtod, which
// takes "Nan", "+Inf" and "-Inf".
#pragma once

#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string>

namespace zeroshard::testing {

using Samples = std::map<std::string, double>;

inline Samples ParseExposition(const std::string& text) {
  Samples out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    if (space == std::string::npos) continue;
    out[line.substr(0, space)] = std::strtod(line.c_str() + space + 1, nullptr);
  }
  return out;
}

inline std::optional<double> Sample(const Samples& s, const std::string& key) {
  auto it = s.find(key);
  if (it == s.end()) return std::nullopt;
  return it->second;
}

// How many samples of metric `name` (any labels) there are.
inline int CountSeries(const Samples& s, const std::string& name) {
  int n = 0;
  for (const auto& [key, value] : s) {
    if (key == name || key.rfind(name + "{", 0) == 0) ++n;
  }
  return n;
}

}  // namespace zeroshard::testing
