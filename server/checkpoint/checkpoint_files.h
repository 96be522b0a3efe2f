// POSIX file helpers for the checkpoint store: full reads/writes that retry
// short transfers, fsync of files and directories, atomic small-file
// replacement, and XXH64 of a file. Every error is an absl::Status naming the
// path and errno; ENOSPC/EDQUOT map to RESOURCE_EXHAUSTED ("disk full") so a
// full disk reads clearly. Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/formats/hashed_read.h"
#include "common/formats/read_only_file.h"

namespace zeroshard::server {

// ErrnoStatus and PReadFull: common/formats/read_only_file.h.

// Writes all `size` bytes at `offset` (pwrite, retrying short writes and EINTR).
absl::Status PWriteFull(int fd, const void* data, int64_t size, int64_t offset,
                        absl::string_view path);
// Writes `pieces`, in order, at `offset` and returns XXH64 (seed 0) of their
// bytes: hashed and written in blocks of about kXxhashCopyBlockBytes, each
// hashed just before its pwritev (retrying short writes and EINTR), while
// still in cache.
absl::StatusOr<uint64_t> PWriteWithXxh64(int fd, absl::Span<const absl::string_view> pieces,
                                         int64_t offset, absl::string_view path);
// PReadWithXxh64: common/formats/hashed_read.h.

absl::Status FsyncPath(const std::string& path);  // A file or a directory.

// Starts the disk writeback of [offset, offset + size) bytes of `fd`
// (sync_file_range SYNC_FILE_RANGE_WRITE) without waiting for it, so the
// disk works while more data arrives and the commit's fsync finds little
// left. Not a durability point: only fsync is. Errors the device reports
// (EIO, ENOSPC) are returned; a file system without it (EINVAL, ENOSYS,
// ESPIPE) is OK (the fsync then does all the work).
absl::Status StartWriteback(int fd, int64_t offset, int64_t size, absl::string_view path);

// Replaces `path` with `contents` atomically: writes `path`.tmp, fsyncs it,
// renames it over `path`, fsyncs the parent directory.
absl::Status WriteFileAtomic(const std::string& path, absl::string_view contents);

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, int64_t max_bytes);

// A file's XXH64 (seed 0) and, in the same read, that of each of its blocks
// of `block_bytes` bytes (the last may be shorter; none for an empty file
// or block_bytes <= 0): CheckpointFile's xxhash64 and block_xxhash64. Read
// in kXxhashCopyBlockBytes pieces, each hashed while still in the core's
// cache.
struct FileHashes {
  uint64_t whole = 0;
  std::vector<uint64_t> blocks;
};
absl::StatusOr<FileHashes> HashFileBlocks(const std::string& path, int64_t block_bytes);

// Size of a regular file in bytes; NOT_FOUND if absent.
absl::StatusOr<int64_t> FileSize(const std::string& path);

}  // namespace zeroshard::server
