#include "worker/offload/block_file.h"

#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace zeroshard {
namespace {

constexpr int kWaitSeconds = 120;  // Longest wait for one chunk.

absl::Status Errno(const char* what, const std::string& path, int err) {
  return absl::InternalError(absl::StrCat(what, " ", path, ": ", std::strerror(err)));
}

}  // namespace

IoRing::IoRing(bool force_pread) {
  if (force_pread) return;
  auto ring = std::make_unique<io_uring>();
  if (io_uring_queue_init(kQueueDepth, ring.get(), 0) == 0) ring_ = std::move(ring);
}

IoRing::~IoRing() {
  if (ring_ != nullptr) io_uring_queue_exit(ring_.get());
}

absl::Status IoRing::Transfer(bool write, int fd, void* buf, int64_t bytes, int64_t offset,
                              const std::string& path) {
  auto* p = static_cast<uint8_t*>(buf);
  if (ring_ != nullptr) return TransferUring(write, fd, p, bytes, offset, path);
  while (bytes > 0) {
    const ssize_t got = write ? ::pwrite(fd, p, static_cast<size_t>(bytes), offset)
                              : ::pread(fd, p, static_cast<size_t>(bytes), offset);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Errno(write ? "write" : "read", path, errno);
    if (got == 0) return absl::DataLossError(absl::StrCat("read ", path, ": file ended early"));
    p += got;
    bytes -= got;
    offset += got;
  }
  return absl::OkStatus();
}

// Keeps up to kQueueDepth chunks in flight; a short completion (rare on
// regular files) is finished synchronously by the pread/pwrite loop.
absl::Status IoRing::TransferUring(bool write, int fd, uint8_t* buf, int64_t bytes, int64_t offset,
                                   const std::string& path) {
  io_uring* ring = ring_.get();
  int64_t issued = 0;
  int in_flight = 0;
  absl::Status status;
  while (issued < bytes || in_flight > 0) {
    while (issued < bytes && in_flight < kQueueDepth) {
      io_uring_sqe* sqe = io_uring_get_sqe(ring);
      if (sqe == nullptr) break;
      const unsigned len = static_cast<unsigned>(std::min(kChunkBytes, bytes - issued));
      if (write) {
        io_uring_prep_write(sqe, fd, buf + issued, len, static_cast<uint64_t>(offset + issued));
      } else {
        io_uring_prep_read(sqe, fd, buf + issued, len, static_cast<uint64_t>(offset + issued));
      }
      io_uring_sqe_set_data64(sqe, static_cast<uint64_t>(issued) << 20 | (len >> 12));
      issued += len;
      ++in_flight;
    }
    const int submitted = io_uring_submit(ring);
    if (submitted < 0 && submitted != -EINTR && submitted != -EAGAIN) {
      return Errno("submit", path, -submitted);
    }
    // Bounded: a device that stops answering is an error, not a hang.
    io_uring_cqe* cqe = nullptr;
    __kernel_timespec limit{kWaitSeconds, 0};
    const int rc = io_uring_wait_cqe_timeout(ring, &cqe, &limit);
    if (rc == -EINTR) continue;
    if (rc == -ETIME) {
      return absl::DeadlineExceededError(absl::StrCat(write ? "write " : "read ", path,
                                                      ": no completion in ", kWaitSeconds, " s"));
    }
    if (rc < 0) return Errno("wait", path, -rc);
    const uint64_t data = io_uring_cqe_get_data64(cqe);
    const int64_t at = static_cast<int64_t>(data >> 20);
    const int64_t len = static_cast<int64_t>(data & 0xFFFFF) << 12;
    const int res = cqe->res;
    io_uring_cqe_seen(ring, cqe);
    --in_flight;
    if (res < 0 && status.ok()) status = Errno(write ? "write" : "read", path, -res);
    if (res >= 0 && res < len && status.ok()) {
      IoRing plain(true);
      status = plain.Transfer(write, fd, buf + at + res, len - res, offset + at + res, path);
    }
  }
  return status;
}

absl::StatusOr<std::unique_ptr<BlockFile>> BlockFile::Create(const std::string& path) {
  constexpr int kFlags = O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC;
  int fd = ::open(path.c_str(), kFlags | O_DIRECT, 0600);
  bool direct = fd >= 0;
  if (fd < 0 && errno == EINVAL) fd = ::open(path.c_str(), kFlags, 0600);
  if (fd < 0) return Errno("open", path, errno);
  // Unlinked at once: the open descriptor keeps the blocks, and no kill
  // (SIGKILL, OOM) can leave scratch files behind.
  ::unlink(path.c_str());
  return std::unique_ptr<BlockFile>(new BlockFile(path, fd, direct));
}

BlockFile::~BlockFile() { ::close(fd_); }

}  // namespace zeroshard
