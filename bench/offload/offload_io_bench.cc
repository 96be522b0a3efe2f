// NVMe store throughput against plain sequential O_DIRECT I/O of the same
// bytes (offload_bench.cc, part 2).
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "bench/offload/offload_bench.h"
#include "worker/device/cpu_device.h"
#include "worker/offload/block_file.h"
#include "worker/offload/optimizer_store.h"

namespace zeroshard::bench {
namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One file, 4 MiB requests, one at a time: the plain sequential baseline.
void PlainDirect(const std::string& path, int64_t bytes, double* write_s, double* read_s) {
  const int64_t block = int64_t{4} << 20;
  AlignedBytes buf = *AllocateAligned(block);
  std::memset(buf.get(), 1, block);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t off = 0; off < bytes; off += block) {
    if (::pwrite(fd, buf.get(), block, off) != block) std::perror("pwrite");
  }
  *write_s = Seconds(t0);
  t0 = std::chrono::steady_clock::now();
  for (int64_t off = 0; off < bytes; off += block) {
    if (::pread(fd, buf.get(), block, off) != block) std::perror("pread");
  }
  *read_s = Seconds(t0);
  ::close(fd);
  ::unlink(path.c_str());
}

}  // namespace

void StoreThroughput(const std::string& dir, int units, long elements, int reps) {
  CpuDevice device(1);
  MemoryAccountant accountant;
  OptimizerStoreOptions o;
  o.target = OffloadTarget::kNvme;
  o.dir = dir;
  o.file_prefix = "zs-offload-bench-";
  std::vector<int64_t> sizes(units, elements);
  auto store = *CreateOptimizerStore(o, sizes, &device, &accountant);
  std::vector<float> a(elements, 1.0f), b(elements, 2.0f), c(elements, 3.0f);
  // Units read back after the first kStagingSlots (which evict whatever the
  // slots held), so every timed read comes from the file.
  const int64_t unit_bytes = 3 * AlignUp(4 * elements);
  const int64_t read_bytes = (units - kStagingSlots) * unit_bytes;
  std::vector<double> sw, sr, pw, pr;
  for (int rep = 0; rep < reps; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (int u = 0; u < units; ++u) (void)store->Load(u, a.data(), b.data(), c.data());
    sw.push_back(units * unit_bytes / Seconds(t0) / 1e9);
    for (int u = 0; u < kStagingSlots; ++u) {
      (void)store->Read(u, 0, elements, a.data(), b.data(), c.data());
    }
    t0 = std::chrono::steady_clock::now();
    for (int u = kStagingSlots; u < units; ++u) {
      (void)store->Read(u, 0, elements, a.data(), b.data(), c.data());
    }
    sr.push_back(read_bytes / Seconds(t0) / 1e9);
    double w = 0, r = 0;
    PlainDirect(dir + "/zs-offload-bench-plain.bin", units * unit_bytes, &w, &r);
    pw.push_back(units * unit_bytes / w / 1e9);
    pr.push_back(units * unit_bytes / r / 1e9);
  }
  std::printf("NVMe store vs plain O_DIRECT (%.1f MiB), median GB/s:\n",
              units * unit_bytes / 1048576.0);
  std::printf("  write: store %.3f  plain %.3f  (%.0f%%)\n", Median(sw), Median(pw),
              100 * Median(sw) / Median(pw));
  std::printf("  read:  store %.3f  plain %.3f  (%.0f%%)\n", Median(sr), Median(pr),
              100 * Median(sr) / Median(pr));
}

}  // namespace zeroshard::bench
