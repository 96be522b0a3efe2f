#include "server/checkpoint/checkpoint_files.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/formats/xxhash_copy.h"
#include "common/status_macros.h"

namespace zeroshard::server {
namespace {

// Closes an fd on scope exit.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

// pwritev of all of `iov` at `offset`, retrying short writes and EINTR;
// `iov` is consumed. Empty entries are skipped (nothing at all: OK).
absl::Status PWritevFull(int fd, std::vector<iovec>& iov, int64_t offset, absl::string_view path) {
  size_t first = 0;
  for (;;) {
    while (first < iov.size() && iov[first].iov_len == 0) ++first;
    if (first == iov.size()) break;
    const int count = static_cast<int>(std::min<size_t>(iov.size() - first, IOV_MAX));
    const ssize_t n = ::pwritev(fd, iov.data() + first, count, offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "write", path);
    }
    if (n == 0) return ErrnoStatus(ENOSPC, "write", path);
    offset += n;
    for (size_t left = static_cast<size_t>(n); left > 0;) {
      const size_t used = std::min(left, iov[first].iov_len);
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + used;
      iov[first].iov_len -= used;
      left -= used;
      if (iov[first].iov_len == 0) ++first;
    }
  }
  iov.clear();
  return absl::OkStatus();
}

}  // namespace

// One short-write loop for both: a single buffer is one iovec.
absl::Status PWriteFull(int fd, const void* data, int64_t size, int64_t offset,
                        absl::string_view path) {
  std::vector<iovec> one{{const_cast<void*>(data), static_cast<size_t>(size)}};
  return PWritevFull(fd, one, offset, path);
}

absl::StatusOr<uint64_t> PWriteWithXxh64(int fd, absl::Span<const absl::string_view> pieces,
                                         int64_t offset, absl::string_view path) {
  Xxh64Stream hash;
  std::vector<iovec> block;
  size_t block_bytes = 0;
  for (absl::string_view piece : pieces) {
    while (!piece.empty()) {
      const size_t n = std::min(piece.size(), kXxhashCopyBlockBytes - block_bytes);
      hash.Update(piece.data(), n);
      block.push_back({const_cast<char*>(piece.data()), n});
      block_bytes += n;
      piece.remove_prefix(n);
      if (block_bytes == kXxhashCopyBlockBytes) {
        ZS_RETURN_IF_ERROR(PWritevFull(fd, block, offset, path));
        offset += static_cast<int64_t>(block_bytes);
        block_bytes = 0;
      }
    }
  }
  ZS_RETURN_IF_ERROR(PWritevFull(fd, block, offset, path));
  return hash.Digest();
}

absl::Status FsyncPath(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open", path);
  FdCloser closer{fd};
  if (::fsync(fd) != 0) return ErrnoStatus(errno, "fsync", path);
  return absl::OkStatus();
}

absl::Status StartWriteback(int fd, int64_t offset, int64_t size, absl::string_view path) {
  if (::sync_file_range(fd, offset, size, SYNC_FILE_RANGE_WRITE) == 0) return absl::OkStatus();
  if (errno == EINVAL || errno == ENOSYS || errno == ESPIPE) return absl::OkStatus();
  return ErrnoStatus(errno, "writeback", path);
}

absl::Status WriteFileAtomic(const std::string& path, absl::string_view contents) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, "create", tmp);
  absl::Status st;
  {
    FdCloser closer{fd};
    st = PWriteFull(fd, contents.data(), static_cast<int64_t>(contents.size()), 0, tmp);
    if (st.ok() && ::fsync(fd) != 0) st = ErrnoStatus(errno, "fsync", tmp);
  }
  if (st.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) st = ErrnoStatus(errno, "rename", tmp);
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  return FsyncPath(std::filesystem::path(path).parent_path().string());
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, int64_t max_bytes) {
  ZS_ASSIGN_OR_RETURN(int64_t size, FileSize(path));
  if (size > max_bytes) {
    return absl::DataLossError(absl::StrCat(path, " is ", size, " bytes, more than ", max_bytes));
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open", path);
  FdCloser closer{fd};
  std::string out(static_cast<size_t>(size), '\0');
  ZS_RETURN_IF_ERROR(PReadFull(fd, out.data(), size, 0, path));
  return out;
}

absl::StatusOr<FileHashes> HashFileBlocks(const std::string& path, int64_t block_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open", path);
  FdCloser closer{fd};
  (void)::posix_fadvise(fd, 0, 0,
                        POSIX_FADV_SEQUENTIAL);  // Advice only; the read works without it.
  FileHashes out;
  Xxh64Stream whole;
  std::optional<Xxh64Stream> block;  // The block being read (block_bytes > 0).
  int64_t in_block = 0;              // Its bytes so far.
  std::vector<char> buf(kXxhashCopyBlockBytes);
  for (;;) {
    // A read never crosses a block's end, so each block's hash ends there.
    const size_t want =
        block_bytes > 0 ? std::min<size_t>(buf.size(), static_cast<size_t>(block_bytes - in_block))
                        : buf.size();
    ssize_t n = ::read(fd, buf.data(), want);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "read", path);
    }
    if (n == 0) break;
    whole.Update(buf.data(), static_cast<size_t>(n));
    if (block_bytes <= 0) continue;
    if (!block.has_value()) block.emplace();
    block->Update(buf.data(), static_cast<size_t>(n));
    in_block += n;
    if (in_block == block_bytes) {
      out.blocks.push_back(block->Digest());
      block.reset();
      in_block = 0;
    }
  }
  if (block.has_value()) out.blocks.push_back(block->Digest());  // A shorter last block.
  out.whole = whole.Digest();
  return out;
}

absl::StatusOr<int64_t> FileSize(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, "stat", path);
  if (!S_ISREG(st.st_mode))
    return absl::DataLossError(absl::StrCat(path, " is not a regular file"));
  return static_cast<int64_t>(st.st_size);
}

}  // namespace zeroshard::server
