#include "bench/checkpoint/bench_report.h"

#include <algorithm>
#include <cstdio>

namespace zeroshard::bench {
namespace {

// Median CPU seconds per GB (10^9 bytes) of each side; the service's
// figure counts /proc's 10 ms clock ticks.
void PrintCpu(const char* what, int64_t total_bytes, const std::vector<CpuSeconds>& runs) {
  std::vector<double> ranks, service;
  for (const CpuSeconds& c : runs) {
    ranks.push_back(c.ranks);
    service.push_back(c.service);
  }
  const double gb = static_cast<double>(total_bytes) / 1e9;
  std::printf("  %s CPU s per GB: service process %.3f, ranks' process %.3f\n", what,
              Median(service) / gb, Median(ranks) / gb);
}

void PrintTls(int64_t total_bytes, const Timings& t) {
  if (t.tls_save_s.empty()) return;
  const double mb = static_cast<double>(total_bytes) / 1e6;
  const double save = mb / Median(t.save_s), restore = mb / Median(t.restore_s);
  const double tls_save = mb / Median(t.tls_save_s), tls_restore = mb / Median(t.tls_restore_s);
  std::printf(
      "  save    over mTLS:        %8.1f MB/s   plaintext:         %8.1f MB/s   ratio %.2f\n",
      tls_save, save, tls_save / save);
  std::printf(
      "  restore over mTLS:        %8.1f MB/s   plaintext:         %8.1f MB/s   ratio %.2f\n",
      tls_restore, restore, tls_restore / restore);
  std::printf("  save runs (s) plaintext:");
  for (double v : t.save_s) std::printf(" %.3f", v);
  std::printf("  mTLS:");
  for (double v : t.tls_save_s) std::printf(" %.3f", v);
  std::printf("\n");
}

// A restore's MB/s against the same run's plain reads: of one file,
// O_DIRECT, and of the checkpoint's files (`files` 0: not measured).
void PrintRestoreRow(const char* what, double mb_s, double read, double direct, double files) {
  std::printf("  %-34s %8.1f MB/s   / plain read %.2f   / O_DIRECT read %.2f", what, mb_s,
              mb_s / read, mb_s / direct);
  if (files > 0) std::printf("   / its files read %.2f", mb_s / files);
  std::printf("\n");
}

double FilesRead(double mb, const Timings& t) {
  return t.files_read_s.empty() ? 0 : mb / Median(t.files_read_s);
}

void PrintRestarts(int64_t total_bytes, const Timings& t) {
  if (t.restart_restore_s.empty()) return;
  const double mb = static_cast<double>(total_bytes) / 1e6;
  const double read = mb / Median(t.read_s), direct = mb / Median(t.direct_read_s);
  PrintRestoreRow("restore after a restart, blocks:", mb / Median(t.restart_restore_s), read,
                  direct, FilesRead(mb, t));
  PrintRestoreRow("  the same, manifest without them:", mb / Median(t.restart_whole_restore_s),
                  read, direct, FilesRead(mb, t));
  PrintCpu("restart restore, blocks", total_bytes, t.restart_restore_cpu);
  PrintCpu("restart restore, whole ", total_bytes, t.restart_whole_restore_cpu);
}

}  // namespace

void PrintReport(const std::string& header, int64_t total_bytes, const Timings& t) {
  const double mb = static_cast<double>(total_bytes) / 1e6;
  const double save = mb / Median(t.save_s), write = mb / Median(t.write_s);
  const double restore = mb / Median(t.restore_s), read = mb / Median(t.read_s);
  std::printf("%s\n", header.c_str());
  std::printf(
      "  save    through service: %8.1f MB/s   plain write+fsync: %8.1f MB/s   ratio %.2f\n", save,
      write, save / write);
  std::printf(
      "  restore through service: %8.1f MB/s   plain read:        %8.1f MB/s   ratio %.2f\n",
      restore, read, restore / read);
  const double direct = mb / Median(t.direct_read_s);
  std::printf(
      "                                               O_DIRECT read:     %8.1f MB/s   ratio %.2f\n",
      direct, restore / direct);
  if (!t.files_read_s.empty()) {
    std::printf(
        "  the checkpoint's files read plainly, as many at once as the restore's streams: %.1f "
        "MB/s; restore / it %.2f\n",
        FilesRead(mb, t), restore / FilesRead(mb, t));
  }
  PrintCpu("save   ", total_bytes, t.save_cpu);
  PrintCpu("restore", total_bytes, t.restore_cpu);
  if (!t.grpc_restore_s.empty()) {
    PrintRestoreRow("restore all through DownloadRange:", mb / Median(t.grpc_restore_s), read,
                    direct, FilesRead(mb, t));
    PrintCpu("restore through DownloadRange", total_bytes, t.grpc_restore_cpu);
  }
  PrintRestarts(total_bytes, t);
  PrintTls(total_bytes, t);
}

void PrintServiceMemory(const ProcessMemory& m) {
  std::printf(
      "  service process memory after the last run's save and restore: VmRSS %.1f MB, VmHWM "
      "%.1f MB\n",
      m.rss_bytes / 1e6, m.hwm_bytes / 1e6);
}

}  // namespace zeroshard::bench
