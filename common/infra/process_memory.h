// This process's memory as /proc shows it: what workers put in their step
// reports and print when they finish, and what the coordinator's
// process_* metrics (process_metrics.h) export. Each read returns nullopt
// where /proc cannot be read. Thread-safe: no state.
#pragma once

#include <optional>

namespace zeroshard {

struct ProcessMemory {
  double virtual_bytes = 0;   // Virtual address space.
  double resident_bytes = 0;  // Resident set size.
};
// /proc/self/statm's size and resident pages, in bytes.
std::optional<ProcessMemory> ReadProcessMemory();

// This process's resident set size in bytes (/proc/self/statm). Workers
// report it in their step reports.
std::optional<double> ResidentMemoryBytes();

// This process's peak resident set size in bytes (VmHWM of
// /proc/self/status). Workers print it when they finish
// (kPeakRssLinePrefix), and `zeroshard launch` collects it.
std::optional<double> PeakResidentMemoryBytes();
inline constexpr char kPeakRssLinePrefix[] = "zeroshard-worker: peak RSS (VmHWM) bytes ";

}  // namespace zeroshard
