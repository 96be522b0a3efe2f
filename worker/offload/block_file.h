// BlockFile: one scratch file of the NVMe offload store, read and written in
// whole aligned blocks. Opened with O_DIRECT where the filesystem allows it
// (tmpfs and some overlay filesystems refuse: then buffered I/O), created
// fresh (O_TRUNC) and unlinked as soon as it is open (the descriptor keeps the
// blocks, so even a killed process leaves no file): offload files are scratch,
// never fsynced; checkpoints stay the durable record.
//
// I/O goes through io_uring (liburing) when the kernel offers it, keeping up
// to kQueueDepth chunks of kChunkBytes in flight per call, and through
// pread/pwrite otherwise (or when forced, for tests). One IoRing per thread:
// a ring is not thread-safe, so each I/O thread owns one.
//
// Alignment: buffers, offsets and sizes passed to Read/Write must be
// multiples of kBlockBytes (4096, common/formats/aligned_bytes.h), which O_DIRECT
// needs; AlignUp rounds; AllocateAligned gives such buffers.
// Errors: INTERNAL naming the path and errno's text for a failed open, read
// or write; DATA_LOSS for a short read (the file ended early);
// DEADLINE_EXCEEDED when io_uring completes no chunk in 120 s (the chunks
// still in flight may land later in the buffer, which callers keep).
// Thread safety: a BlockFile may be read and written from several threads
// at once on disjoint ranges; an IoRing by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/formats/aligned_bytes.h"

struct io_uring;

namespace zeroshard {

inline constexpr int64_t kChunkBytes = int64_t{1} << 20;
inline constexpr int kQueueDepth = 16;

// The per-thread I/O engine: io_uring, or pread/pwrite.
class IoRing {
 public:
  // io_uring unless `force_pread` or io_uring_queue_init fails (a kernel or
  // seccomp policy without it): then pread/pwrite.
  explicit IoRing(bool force_pread);
  ~IoRing();
  IoRing(const IoRing&) = delete;
  IoRing& operator=(const IoRing&) = delete;
  bool uses_uring() const { return ring_ != nullptr; }
  // Transfers `bytes` at `offset` of `fd` into (read) or out of `buf`.
  absl::Status Transfer(bool write, int fd, void* buf, int64_t bytes, int64_t offset,
                        const std::string& path);

 private:
  absl::Status TransferUring(bool write, int fd, uint8_t* buf, int64_t bytes, int64_t offset,
                             const std::string& path);
  std::unique_ptr<io_uring> ring_;
};

class BlockFile {
 public:
  // Creates (truncating) `path`, O_DIRECT when the filesystem takes it.
  static absl::StatusOr<std::unique_ptr<BlockFile>> Create(const std::string& path);
  ~BlockFile();  // Closes (the file has no name since Create).
  BlockFile(const BlockFile&) = delete;
  BlockFile& operator=(const BlockFile&) = delete;

  absl::Status Read(IoRing& ring, void* buf, int64_t bytes, int64_t offset) {
    return ring.Transfer(false, fd_, buf, bytes, offset, path_);
  }
  absl::Status Write(IoRing& ring, const void* buf, int64_t bytes, int64_t offset) {
    return ring.Transfer(true, fd_, const_cast<void*>(buf), bytes, offset, path_);
  }
  bool direct() const { return direct_; }
  const std::string& path() const { return path_; }

 private:
  BlockFile(std::string path, int fd, bool direct)
      : path_(std::move(path)), fd_(fd), direct_(direct) {}
  std::string path_;
  int fd_ = -1;
  bool direct_ = false;
};

}  // namespace zeroshard
