#include "bench/support/median.h"

#include <algorithm>

namespace zeroshard::bench {

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace zeroshard::bench
