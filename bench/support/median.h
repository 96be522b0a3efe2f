// The median the benches report: the middle of an odd count, the upper of
// the two middles of an even one, 0 for none (bench/comm keeps its own,
// which averages the two middles). Thread safety: stateless.
#pragma once

#include <vector>

namespace zeroshard::bench {

double Median(std::vector<double> v);

}  // namespace zeroshard::bench
