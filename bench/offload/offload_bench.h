// Shared pieces of offload_bench (see offload_bench.cc).
#pragma once

#include <string>
#include <vector>

namespace zeroshard::bench {

double Median(std::vector<double> v);
// The NVMe store's write and read throughput (GB/s) over `units` units of
// `elements` each against plain sequential O_DIRECT pwrite/pread of the
// same bytes, `reps` runs each, in `dir`; prints the table.
void StoreThroughput(const std::string& dir, int units, long elements, int reps);

}  // namespace zeroshard::bench
