// What /proc says of another process: the CPU time it has used and its
// resident memory, for benches that run a server in a child process and
// charge it apart from their clients (Linux proc(5)).
//
// Thread safety: stateless; any thread.
#pragma once

#include <sys/types.h>

namespace zeroshard::bench {

// User + system CPU seconds process `pid` has used so far (utime + stime of
// /proc/PID/stat over the clock tick); 0 if it cannot be read.
double ProcessCpuSeconds(pid_t pid);

struct ProcessMemory {
  double rss_bytes = 0;  // VmRSS of /proc/PID/status: resident now.
  double hwm_bytes = 0;  // VmHWM: the peak resident set so far.
};
// Zeros where /proc/PID/status cannot be read.
ProcessMemory ReadProcessMemory(pid_t pid);

}  // namespace zeroshard::bench
