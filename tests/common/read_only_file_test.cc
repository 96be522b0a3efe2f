// ReadOnlyFile (common/formats/read_only_file.h): every range it reads equals the
// file's bytes, whether it comes from the page cache or (the file evicted)
// straight from the disk through the aligned bounce buffer; a range past
// the end is DATA_LOSS naming the path.
#include "common/formats/read_only_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

class ReadOnlyFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // $TEST_TMPDIR or /tmp: where that is tmpfs (no O_DIRECT), the disk case skips.
    path_ = ::testing::TempDir() + "read_only_file_" + std::to_string(::getpid());
    std::mt19937 gen(11);
    bytes_.resize((3 << 20) + 4321);  // Three direct blocks and an unaligned tail.
    for (char& c : bytes_) c = static_cast<char>(gen());
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, bytes_.data(), bytes_.size()), static_cast<ssize_t>(bytes_.size()));
    ASSERT_EQ(::fsync(fd), 0);  // Clean pages, so the eviction below can drop them.
    ::close(fd);
  }
  void TearDown() override { ::unlink(path_.c_str()); }
  void Evict() {
    const int fd = ::open(path_.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
  // Ranges that start and end on and off block boundaries, inside one
  // direct block and across several, at the file's end, and tiny.
  void ExpectRangesEqual(const ReadOnlyFile& file) {
    const int64_t size = static_cast<int64_t>(bytes_.size());
    const std::vector<std::pair<int64_t, int64_t>> ranges = {{0, 1 << 20},
                                                             {4096, 65536},
                                                             {4095, (1 << 20) + 2},
                                                             {123, (2 << 20) + 77},
                                                             {size - 100000, 100000},
                                                             {size - 5, 5},
                                                             {777, 70000},
                                                             {0, size}};
    for (auto [offset, n] : ranges) {
      std::vector<char> got(static_cast<size_t>(n));
      ASSERT_TRUE(file.Read(got.data(), n, offset).ok()) << offset << "+" << n;
      EXPECT_TRUE(std::equal(got.begin(), got.end(), bytes_.begin() + offset))
          << offset << "+" << n;
    }
  }
  std::string path_;
  std::vector<char> bytes_;
};

TEST_F(ReadOnlyFileTest, CachedRangesAreTheFilesBytes) {
  absl::StatusOr<ReadOnlyFile> file = ReadOnlyFile::Open(path_);
  ASSERT_TRUE(file.ok()) << file.status();
  ExpectRangesEqual(*file);
}

TEST_F(ReadOnlyFileTest, UncachedRangesComeFromTheDiskAndAreTheFilesBytes) {
  absl::StatusOr<ReadOnlyFile> file = ReadOnlyFile::Open(path_);
  ASSERT_TRUE(file.ok()) << file.status();
  Evict();
  if (!file->has_direct() || !file->ReadsDirect(1 << 20, 0)) {
    GTEST_SKIP() << "no direct read here (O_DIRECT: " << (file->has_direct() ? "yes" : "no")
                 << "; cachestat(2) needs Linux 6.5, or the eviction did not take)";
  }
  std::printf("direct reads on %s\n", path_.c_str());
  EXPECT_FALSE(file->ReadsDirect(4096, 0)) << "a read under kMinDirectBytes stays buffered";
  ExpectRangesEqual(*file);
  Evict();
  std::vector<char> got(1 << 20);
  ASSERT_TRUE(file->Read(got.data(), 1 << 20, 5).ok());
  EXPECT_TRUE(file->ReadsDirect(1 << 20, 0)) << "a direct read leaves the range uncached";
}

TEST_F(ReadOnlyFileTest, PastTheEndIsDataLossNamingThePath) {
  absl::StatusOr<ReadOnlyFile> file = ReadOnlyFile::Open(path_);
  ASSERT_TRUE(file.ok()) << file.status();
  const int64_t size = static_cast<int64_t>(bytes_.size());
  std::vector<char> got(1 << 20);
  for (bool evict : {false, true}) {
    if (evict) Evict();
    absl::Status st = file->Read(got.data(), 1 << 20, size - 1000);
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
    EXPECT_NE(st.message().find(path_), std::string::npos) << st;
  }
}

TEST(ReadOnlyFileOpenTest, AMissingFileIsNotFound) {
  absl::StatusOr<ReadOnlyFile> file = ReadOnlyFile::Open("/nonexistent/zeroshard/file");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound) << file.status();
}

}  // namespace
}  // namespace zeroshard
