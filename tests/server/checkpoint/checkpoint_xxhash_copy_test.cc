// The fused copy+hash helpers against xxhash's one-shot XXH64 of the same
// bytes (the independent reference), at sizes around the block size; and
// StartWriteback's errors.
#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/formats/xxhash_copy.h"
#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_files.h"

namespace zeroshard {
namespace {

std::vector<char> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<char> v(n);
  for (char& c : v) c = static_cast<char>(rng());
  return v;
}

const size_t kSizes[] = {0,
                         1,
                         7,
                         kXxhashCopyBlockBytes - 1,
                         kXxhashCopyBlockBytes,
                         kXxhashCopyBlockBytes + 1,
                         (1 << 20) + 3};

TEST(XxhashCopyTest, CopiesAndHashesLikeOneShotXxh64) {
  for (size_t n : kSizes) {
    const std::vector<char> src = RandomBytes(n, static_cast<uint32_t>(n));
    std::vector<char> dst(n + 1, 'z');
    EXPECT_EQ(CopyWithXxh64(dst.data(), src.data(), n), XXH64(src.data(), n, 0)) << n;
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin())) << n;
    EXPECT_EQ(dst[n], 'z') << "wrote past the end at size " << n;
  }
}

TEST(XxhashCopyTest, PWriteOfPiecesWritesAndHashesTheirConcatenation) {
  char path[] = "/tmp/zs_xxhash_pwrite_XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  std::mt19937 rng(5);
  for (size_t total : kSizes) {
    const std::vector<char> bytes = RandomBytes(total, static_cast<uint32_t>(total) + 1);
    // Cut at random points, empty pieces included (as gRPC's slices come).
    std::vector<absl::string_view> pieces;
    for (size_t at = 0; at < total || pieces.empty();) {
      const size_t n = std::min<size_t>(total - at, rng() % 3 == 0 ? 0 : rng() % 70000);
      pieces.emplace_back(bytes.data() + at, n);
      at += n;
      if (total == 0) break;
    }
    ASSERT_EQ(::ftruncate(fd, 0), 0);
    absl::StatusOr<uint64_t> h = server::PWriteWithXxh64(fd, pieces, 9, path);
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ(*h, XXH64(bytes.data(), total, 0)) << total;
    std::vector<char> back(total);
    ASSERT_TRUE(PReadFull(fd, back.data(), static_cast<int64_t>(total), 9, path).ok());
    EXPECT_TRUE(back == bytes) << total << " bytes in " << pieces.size() << " pieces";
  }
  ::close(fd);
  ::unlink(path);
}

TEST(XxhashCopyTest, PReadHashesTheBytesAtTheOffset) {
  char path[] = "/tmp/zs_xxhash_copy_XXXXXX";
  int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::vector<char> file = RandomBytes((1 << 20) + 100, 7);
  ASSERT_TRUE(server::PWriteFull(fd, file.data(), static_cast<int64_t>(file.size()), 0, path).ok());
  absl::StatusOr<ReadOnlyFile> read = ReadOnlyFile::Open(path);
  ASSERT_TRUE(read.ok()) << read.status();
  for (size_t n : kSizes) {
    std::vector<char> got(n);
    absl::StatusOr<uint64_t> h = PReadWithXxh64(*read, got.data(), static_cast<int64_t>(n), 50);
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ(*h, XXH64(file.data() + 50, n, 0)) << n;
    EXPECT_TRUE(std::equal(got.begin(), got.end(), file.begin() + 50)) << n;
  }
  std::vector<char> big(file.size());
  EXPECT_EQ(PReadWithXxh64(*read, big.data(), static_cast<int64_t>(big.size()), 1).status().code(),
            absl::StatusCode::kDataLoss);  // One byte past the end.
  EXPECT_TRUE(server::StartWriteback(fd, 0, static_cast<int64_t>(file.size()), path).ok());
  ::close(fd);
  ::unlink(path);
  EXPECT_EQ(server::StartWriteback(-1, 0, 1, path).code(), absl::StatusCode::kInternal)
      << "a bad fd is an error (EBADF)";
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  EXPECT_TRUE(server::StartWriteback(pipe_fds[1], 0, 1, "pipe").ok()) << "ESPIPE is not an error";
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}

}  // namespace
}  // namespace zeroshard
