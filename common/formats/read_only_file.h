// Reading files by byte range without paying the page cache for data that
// is not in it.
//
// ReadOnlyFile opens a file twice: buffered, and with O_DIRECT where the
// file system takes it (tmpfs and some overlay file systems refuse; then
// buffered only). Each Read asks the kernel which of the range's pages are
// cached (cachestat(2), Linux 6.5+): a range cached whole is copied from
// the page cache; any other range is read straight from the disk into an
// aligned bounce buffer (kDirectBlockBytes at a time) and copied out.
// Where cachestat is missing (probed at Open), after the file system
// refused a direct read (EINVAL), for reads under kMinDirectBytes, or with
// ZEROSHARD_DIRECT_READS=0 in the environment (a file system whose O_DIRECT
// misbehaves; A/B benchmarks), it reads buffered, as a plain pread does.
//
// Why: on the 2-core VM this project measures on, a cold buffered read of
// 2 GB costs ~1.1 CPU-seconds in the kernel (page-cache allocation, memory
// cgroup charging, the copy), an O_DIRECT read of the same files ~0.15
// (bench/README.md, "Loading a model directory"). The coordinator reads
// model weights and checkpoints once each, so caching them buys nothing.
// Direct reads are coherent with the page cache: the kernel writes back
// dirty pages of the range first.
//
// Errors name the path: NOT_FOUND or INTERNAL with errno's text for open;
// INTERNAL for a failed read; DATA_LOSS when the file ends inside the range.
// Thread safety: Read may be called from any number of threads at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace zeroshard {

// Status for a failed syscall `what` on `path` with errno `err`:
// RESOURCE_EXHAUSTED ("disk full: ...") for ENOSPC/EDQUOT, NOT_FOUND for
// ENOENT, INTERNAL otherwise.
absl::Status ErrnoStatus(int err, absl::string_view what, absl::string_view path);

// A new open file description of the file `fd` refers to (open(2) of
// /proc/self/fd/<fd> with O_RDONLY | O_CLOEXEC | `extra_flags`, e.g.
// O_DIRECT): its own offset, flags and readahead state. -1 with errno set
// where that fails.
int ReopenReadOnly(int fd, int extra_flags = 0);

// Reads exactly `size` bytes at `offset` (pread, retrying short reads and
// EINTR); DATA_LOSS if the file is shorter.
absl::Status PReadFull(int fd, void* data, int64_t size, int64_t offset, absl::string_view path);

class ReadOnlyFile {
 public:
  static constexpr int64_t kDirectBlockBytes = int64_t{1} << 20;
  static constexpr int64_t kMinDirectBytes = int64_t{64} << 10;

  static absl::StatusOr<ReadOnlyFile> Open(const std::string& path);
  // Takes ownership of descriptors another process opened with Open and
  // passed over a Unix socket (local reads, server/checkpoint/README.md):
  // `fd` buffered, `direct_fd` O_DIRECT or -1. `name` labels errors. With
  // ZEROSHARD_DIRECT_READS=0 here, or no cachestat, `direct_fd` is closed.
  static ReadOnlyFile Adopt(std::string name, int fd, int direct_fd);
  ReadOnlyFile(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile& operator=(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;
  ~ReadOnlyFile();

  // Bytes [offset, offset + size) into dst (any alignment).
  absl::Status Read(void* dst, int64_t size, int64_t offset) const;
  // The same bytes from the page cache always (a plain pread).
  absl::Status ReadCached(void* dst, int64_t size, int64_t offset) const {
    return PReadFull(fd_, dst, size, offset, path_);
  }
  // Whether a Read of that range would go to the disk directly (direct
  // reads are possible, the range is large enough and not cached whole).
  bool ReadsDirect(int64_t size, int64_t offset) const;
  // The same bytes from the disk, whatever the cache holds (a caller that
  // asked ReadsDirect already); buffered where direct reads are not possible.
  absl::Status ReadUncached(void* dst, int64_t size, int64_t offset) const;
  // Direct reads are possible: O_DIRECT opened, cachestat answers, and no
  // read was refused (EINVAL) yet.
  bool has_direct() const { return direct_fd_ >= 0 && !direct_refused_; }
  const std::string& path() const { return path_; }
  // The buffered descriptor, still owned by this object: to pass to
  // another process, which Adopts a duplicate of it.
  int fd() const { return fd_; }

 private:
  ReadOnlyFile(std::string path, int fd, int direct_fd)
      : path_(std::move(path)), fd_(fd), direct_fd_(direct_fd) {}
  absl::Status ReadDirect(char* dst, int64_t size, int64_t offset) const;
  std::string path_;
  int fd_ = -1;
  int direct_fd_ = -1;
  mutable std::atomic<bool> direct_refused_{false};
};

}  // namespace zeroshard
