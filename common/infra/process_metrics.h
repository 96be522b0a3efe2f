// The process's own metrics under the standard Prometheus client names
// (the ones the Go and Python clients export), read at each scrape:
//   process_cpu_seconds_total      counter  user + system CPU seconds (getrusage)
//   process_resident_memory_bytes  gauge    resident set size (/proc/self/statm)
//   process_virtual_memory_bytes   gauge    virtual memory size (/proc/self/statm)
//   process_open_fds               gauge    open file descriptors (/proc/self/fd)
//   process_max_fds                gauge    the soft RLIMIT_NOFILE
//   process_start_time_seconds     gauge    start time, seconds since the Unix epoch
//                                           (/proc/self/stat starttime + /proc/stat btime)
// A figure that cannot be read (no /proc) is left out of the scrape rather
// than reported as 0.
//
// This process's memory without Prometheus: common/infra/process_memory.h.
// Thread safety: Collect may run on any thread; it keeps no state.
#pragma once

#include <optional>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace zeroshard {

class ProcessMetrics : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

}  // namespace zeroshard
