#include "common/formats/read_only_file.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/formats/aligned_bytes.h"
#include "common/status_macros.h"

namespace zeroshard {
namespace {

// cachestat(2) (Linux 6.5, include/uapi/linux/mman.h), declared here: the
// build machine's kernel headers may predate it. 451 on every architecture.
constexpr long kCachestatSyscall = 451;
struct CachestatRange {
  uint64_t off;
  uint64_t len;
};
struct Cachestat {
  uint64_t nr_cache;
  uint64_t nr_dirty;
  uint64_t nr_writeback;
  uint64_t nr_evicted;
  uint64_t nr_recently_evicted;
};

// 1 when every page of [offset, offset + size) is in the page cache, 0
// when one is not, -1 where the kernel cannot say (no cachestat). Pages are
// the kernel's (4 KiB here, 16 or 64 KiB on some arm64 kernels).
int CachedWhole(int fd, int64_t size, int64_t offset) {
  static const int64_t page = ::sysconf(_SC_PAGESIZE);
  const int64_t first = offset / page, last = (offset + std::max<int64_t>(size, 1) - 1) / page;
  CachestatRange range{static_cast<uint64_t>(first * page),
                       static_cast<uint64_t>((last - first + 1) * page)};
  Cachestat stat{};
  if (::syscall(kCachestatSyscall, fd, &range, &stat, 0) != 0) return -1;
  return stat.nr_cache >= static_cast<uint64_t>(last - first + 1) ? 1 : 0;
}

}  // namespace

absl::Status ErrnoStatus(int err, absl::string_view what, absl::string_view path) {
  std::string msg = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == ENOSPC || err == EDQUOT) {
    return absl::ResourceExhaustedError(absl::StrCat("disk full: ", msg));
  }
  if (err == ENOENT) return absl::NotFoundError(msg);
  return absl::InternalError(msg);
}

absl::Status PReadFull(int fd, void* data, int64_t size, int64_t offset, absl::string_view path) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = ::pread(fd, p, static_cast<size_t>(size), offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "read", path);
    }
    if (n == 0) {
      return absl::DataLossError(
          absl::StrCat("read ", path, ": file ends at byte ", offset, ", ", size, " bytes short"));
    }
    p += n;
    size -= n;
    offset += n;
  }
  return absl::OkStatus();
}

int ReopenReadOnly(int fd, int extra_flags) {
  const std::string proc = "/proc/self/fd/" + std::to_string(fd);
  return ::open(proc.c_str(), O_RDONLY | O_CLOEXEC | extra_flags);
}

namespace {

bool DirectReadsAllowed() {
  const char* off = std::getenv("ZEROSHARD_DIRECT_READS");
  return off == nullptr || std::string_view(off) != "0";
}

}  // namespace

absl::StatusOr<ReadOnlyFile> ReadOnlyFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open", path);
  // Any failure here (EINVAL where the file system has no O_DIRECT) leaves
  // the buffered descriptor alone.
  const int direct_fd =
      DirectReadsAllowed() ? ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT) : -1;
  return Adopt(path, fd, direct_fd);
}

ReadOnlyFile ReadOnlyFile::Adopt(std::string name, int fd, int direct_fd) {
  // Without cachestat no range would ever read direct: say so at once.
  if (direct_fd >= 0 && (!DirectReadsAllowed() || CachedWhole(fd, 1, 0) < 0)) {
    ::close(direct_fd);
    direct_fd = -1;
  }
  return ReadOnlyFile(std::move(name), fd, direct_fd);
}

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      direct_fd_(std::exchange(other.direct_fd_, -1)),
      direct_refused_(other.direct_refused_.load()) {}

ReadOnlyFile& ReadOnlyFile::operator=(ReadOnlyFile&& other) noexcept {
  std::swap(path_, other.path_);
  std::swap(fd_, other.fd_);
  std::swap(direct_fd_, other.direct_fd_);
  direct_refused_ = other.direct_refused_.exchange(direct_refused_.load());
  return *this;  // `other` closes what this held.
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
  if (direct_fd_ >= 0) ::close(direct_fd_);
}

bool ReadOnlyFile::ReadsDirect(int64_t size, int64_t offset) const {
  return has_direct() && size >= kMinDirectBytes && CachedWhole(fd_, size, offset) == 0;
}

absl::Status ReadOnlyFile::Read(void* dst, int64_t size, int64_t offset) const {
  if (size <= 0) return absl::OkStatus();
  if (ReadsDirect(size, offset)) return ReadUncached(dst, size, offset);
  return PReadFull(fd_, dst, size, offset, path_);
}

absl::Status ReadOnlyFile::ReadUncached(void* dst, int64_t size, int64_t offset) const {
  if (!has_direct()) return PReadFull(fd_, dst, size, offset, path_);
  return ReadDirect(static_cast<char*>(dst), size, offset);
}

absl::Status ReadOnlyFile::ReadDirect(char* dst, int64_t size, int64_t offset) const {
  // One bounce buffer per thread, kept: a fresh 1 MiB each call is a fresh
  // mapping under glibc, faulted in page by page on every read.
  thread_local absl::StatusOr<AlignedBytes> bounce_buffer =
      absl::ResourceExhaustedError("no bounce buffer yet");
  if (!bounce_buffer.ok()) bounce_buffer = AllocateAligned(kDirectBlockBytes);  // Or again.
  if (!bounce_buffer.ok()) return bounce_buffer.status();
  AlignedBytes& bounce = *bounce_buffer;
  while (size > 0) {
    const int64_t lo = AlignDown(offset);
    const int64_t want = std::min(AlignUp(offset + size) - lo, kDirectBlockBytes);
    ssize_t got = ::pread(direct_fd_, bounce.get(), static_cast<size_t>(want), lo);
    if (got < 0 && errno == EINTR) continue;
    // EINVAL: this file system takes O_DIRECT at open but not its reads;
    // buffered from here on, for this file.
    if (got < 0 && errno == EINVAL) {
      direct_refused_ = true;
      return PReadFull(fd_, dst, size, offset, path_);
    }
    if (got < 0) return ErrnoStatus(errno, "read", path_);
    const int64_t usable = std::min<int64_t>(got, want) - (offset - lo);
    if (usable <= 0) {
      return absl::DataLossError(
          absl::StrCat("read ", path_, ": file ends at byte ", offset, ", ", size, " bytes short"));
    }
    const int64_t n = std::min(usable, size);
    std::memcpy(dst, bounce.get() + (offset - lo), static_cast<size_t>(n));
    dst += n;
    offset += n;
    size -= n;
  }
  return absl::OkStatus();
}

}  // namespace zeroshard
