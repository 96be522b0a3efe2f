// The NVMe store's I/O (worker/offload/block_file.h, io_queue.h) and the
// offload flag checks (common/offload_config.h): where the kernel offers
// io_uring (probed here with liburing itself) the queue uses it, and where it
// does not the io_uring case is skipped with the probe's error; data written
// through io_uring and through the forced pread/pwrite fallback reads back equal to
// an independently generated pattern (across chunk boundaries and a size
// that is not a chunk multiple); files are unlinked with their BlockFile;
// a missing dir, an unwritable one and one without room for the bytes
// needed each give one line naming --offload-dir; bad values name the flag.
#include <liburing.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "absl/time/time.h"
#include "common/offload_config.h"
#include "gtest/gtest.h"
#include "worker/device/cpu_device.h"
#include "worker/offload/block_file.h"
#include "worker/offload/io_queue.h"
#include "worker/offload/optimizer_store.h"

namespace zeroshard {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/zs_offload_io_XXXXXX";
  return mkdtemp(tmpl);
}

// "" when this kernel (and its seccomp policy) lets a process set up an
// io_uring, else why not: a probe independent of the code under test.
std::string IoUringUnavailable() {
  struct io_uring ring;
  const int rc = io_uring_queue_init(4, &ring, 0);
  if (rc < 0) return std::strerror(-rc);
  io_uring_queue_exit(&ring);
  return "";
}

uint8_t Pattern(int64_t i) { return static_cast<uint8_t>((i * 2654435761u) >> 13); }

void RoundTrip(bool force_pread) {
  const std::string dir = TempDir();
  const std::string path = dir + "/f.bin";
  const int64_t bytes = 3 * kChunkBytes + 5 * kBlockBytes;  // Not a chunk multiple.
  {
    absl::StatusOr<std::unique_ptr<BlockFile>> file = BlockFile::Create(path);
    ASSERT_TRUE(file.ok()) << file.status();
    std::printf("O_DIRECT on %s: %s\n", dir.c_str(), (*file)->direct() ? "yes" : "no");
    absl::StatusOr<AlignedBytes> out = AllocateAligned(bytes), in = AllocateAligned(bytes);
    ASSERT_TRUE(out.ok() && in.ok());
    for (int64_t i = 0; i < bytes; ++i) out->get()[i] = Pattern(i);
    std::memset(in->get(), 0, bytes);
    IoQueue queue(force_pread);
    std::printf("io_uring %s\n", queue.uses_uring() ? "in use" : "not in use (pread/pwrite)");
    EXPECT_EQ(queue.uses_uring(), !force_pread) << "the kernel offers io_uring";
    const IoQueue::Ticket w = queue.Submit(true, file->get(), out->get(), bytes, 0);
    const IoQueue::Ticket r = queue.Submit(false, file->get(), in->get(), bytes, 0);
    EXPECT_GT(r, w);
    ASSERT_TRUE(queue.Wait(r, absl::Seconds(30)).ok());
    for (int64_t i = 0; i < bytes; ++i) ASSERT_EQ(in->get()[i], Pattern(i)) << i;
    // Reading past the end is a clear error, not garbage.
    const IoQueue::Ticket past = queue.Submit(false, file->get(), in->get(), kBlockBytes, bytes);
    EXPECT_EQ(queue.Wait(past, absl::Seconds(30)).code(), absl::StatusCode::kDataLoss);
    // Unlinked while open: a killed worker leaves no scratch file.
    struct stat st {};
    EXPECT_NE(::stat(path.c_str(), &st), 0) << path << " still has a name while open";
  }
  struct stat st {};
  EXPECT_NE(::stat(path.c_str(), &st), 0) << path << " left behind";
  ::rmdir(dir.c_str());
}

TEST(OffloadIoTest, RoundTripThroughIoUring) {
  const std::string why = IoUringUnavailable();
  if (!why.empty()) GTEST_SKIP() << "io_uring_queue_init fails here: " << why;
  RoundTrip(false);
}
TEST(OffloadIoTest, RoundTripThroughForcedPreadFallback) { RoundTrip(true); }

TEST(OffloadIoTest, DirChecksNameTheFlag) {
  const std::string dir = TempDir();
  EXPECT_TRUE(CheckOffloadDir(dir, 1).ok());
  absl::Status s = CheckOffloadDir(dir + "/missing", 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("--offload-dir"), std::string::npos) << s;
  s = CheckOffloadDir("", 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  // A "full disk": more bytes than any filesystem here has free.
  s = CheckOffloadDir(dir, int64_t{1} << 60);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("GiB free"), std::string::npos) << s;
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
  ::rmdir(dir.c_str());
}

TEST(OffloadIoTest, NvmeStoreNeedsAnExistingDir) {
  CpuDevice device(1);
  MemoryAccountant accountant;
  OptimizerStoreOptions o;
  o.target = OffloadTarget::kNvme;
  o.dir = "/nonexistent/zs";
  auto store = CreateOptimizerStore(o, {10, 20}, &device, &accountant);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("/nonexistent/zs"), std::string::npos);
}

// Read and Load address element ranges; the store's bytes are accounted.
TEST(OffloadIoTest, NvmeStoreReadsRangesItLoaded) {
  CpuDevice device(1);
  MemoryAccountant accountant;
  OptimizerStoreOptions o;
  o.target = OffloadTarget::kNvme;
  o.dir = "/tmp";
  o.file_prefix = "zs-offload-io-test-";
  auto store = CreateOptimizerStore(o, {1000, 5, 3000, 7}, &device, &accountant);
  ASSERT_TRUE(store.ok()) << store.status();
  for (int u = 0; u < 4; ++u) {
    const int64_t n = (*store)->size(u);
    std::vector<float> a(n), b(n), c(n);
    for (int64_t i = 0; i < n; ++i) a[i] = u + i * 0.5f, b[i] = -i, c[i] = i * i;
    ASSERT_TRUE((*store)->Load(u, a.data(), b.data(), c.data()).ok());
  }
  for (int u = 3; u >= 0; --u) {
    const int64_t n = (*store)->size(u), off = n / 3, len = n - off;
    std::vector<float> a(len), b(len), c(len);
    ASSERT_TRUE((*store)->Read(u, off, len, a.data(), b.data(), c.data()).ok());
    for (int64_t i = 0; i < len; ++i) {
      const int64_t e = off + i;
      ASSERT_TRUE(a[i] == u + e * 0.5f && b[i] == -e && c[i] == e * e) << u << " " << e;
    }
  }
  EXPECT_EQ((*store)->Read(0, 900, 101, nullptr, nullptr, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(accountant.current().offloaded,
            3 * AlignUp(4000) + 3 * AlignUp(20) + 3 * AlignUp(12000) + 3 * AlignUp(28));
  EXPECT_EQ(accountant.current().optimizer, kStagingSlots * 3 * AlignUp(12000));
  store->reset();
  EXPECT_EQ(accountant.current().offloaded, 0);
  EXPECT_EQ(accountant.current().optimizer, 0);
}

}  // namespace
}  // namespace zeroshard
