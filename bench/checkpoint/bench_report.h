// What checkpoint_bench measured in its runs, and its printed report:
// MB/s through the service against the plain write / read of the same run
// (medians), each side's CPU seconds per GB, the service's memory, TLS's
// cost, and the restores after a service restart.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/support/median.h"
#include "bench/support/proc_stat.h"

namespace zeroshard::bench {

// CPU seconds of the bench's process (the ranks' side) and of the service's.
struct CpuSeconds {
  double ranks = 0, service = 0;
};

// Per-run seconds of each measurement (tls_*: the mTLS service's;
// restart_*: a restore served by a service just restarted on the same dir,
// with the manifest's block hashes, and again in the format before them).
struct Timings {
  std::vector<double> save_s, write_s, restore_s, read_s, direct_read_s, tls_save_s, tls_restore_s;
  std::vector<double> restart_restore_s, restart_whole_restore_s;
  // The same restore with every byte through DownloadRange (local reads off).
  std::vector<double> grpc_restore_s;
  // The checkpoint's own files read plainly, as many at once as the
  // restore has streams (PlainReadFiles).
  std::vector<double> files_read_s;
  std::vector<CpuSeconds> grpc_restore_cpu;
  std::vector<CpuSeconds> save_cpu, restore_cpu;  // The plaintext service's runs.
  std::vector<CpuSeconds> restart_restore_cpu, restart_whole_restore_cpu;
  // The plaintext service's memory after the last run's save and restore,
  // read before it was restarted for the restart_* restores.
  ProcessMemory service_memory;
};

// `header`: the first line (the run's shape); `total_bytes`: state bytes
// saved and restored per run.
void PrintReport(const std::string& header, int64_t total_bytes, const Timings& t);
void PrintServiceMemory(const ProcessMemory& m);

}  // namespace zeroshard::bench
