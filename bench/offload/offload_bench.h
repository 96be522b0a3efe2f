// Shared pieces of offload_bench (see offload_bench.cc).
#pragma once

#include <string>
#include <vector>

#include "bench/support/median.h"
#include "worker/comm/communicator.h"

namespace zeroshard::bench {

// The NVMe store's write and read throughput (GB/s) over `units` units of
// `elements` each against plain sequential O_DIRECT pwrite/pread of the
// same bytes, `reps` runs each, in `dir`; prints the table.
void StoreThroughput(const std::string& dir, int units, long elements, int reps);
// Stage-3 whole-step time with the compute shards resident and in NVMe
// files (--offload-params nvme, prefetch 0 and 2), ratios to resident;
// prints the table (param_offload_bench.cc).
void ParamOffloadSteps(const std::string& dir, int units, long elements, int reps, int steps,
                       Communicator* comm);

}  // namespace zeroshard::bench
