#include "worker/comm/shm_segment.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/infra/host_name.h"

namespace zeroshard {
namespace {

size_t SegmentBytes(size_t slot_bytes) { return sizeof(ShmHeader) + 2 * slot_bytes; }

absl::Status Errno(const std::string& what, int err) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(err));
  if (err == ENOSPC || err == ENOMEM) return absl::ResourceExhaustedError(message);
  if (err == ENOENT) return absl::NotFoundError(message);
  return absl::UnavailableError(message);
}

// Maps `fd`'s `bytes` read-write and shared; closes fd.
absl::StatusOr<void*> MapShared(int fd, size_t bytes, const std::string& name) {
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (base == MAP_FAILED) return Errno(absl::StrCat("shm: mmap ", name), err);
  return base;
}

}  // namespace

ShmSegment::ShmSegment(ShmSegment&& other) noexcept { *this = std::move(other); }

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    Reset();
    base_ = std::exchange(other.base_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    slot_bytes_ = std::exchange(other.slot_bytes_, 0);
    name_ = std::exchange(other.name_, {});
  }
  return *this;
}

void ShmSegment::Reset() {
  Unlink();
  if (base_ != nullptr) munmap(base_, bytes_);
  base_ = nullptr;
  bytes_ = 0;
  slot_bytes_ = 0;
}

void ShmSegment::Unlink() {
  if (!name_.empty()) shm_unlink(name_.c_str());
  name_.clear();
}

char* ShmSegment::slot(uint32_t round) const {
  return static_cast<char*>(base_) + sizeof(ShmHeader) + (round % 2) * slot_bytes_;
}

absl::StatusOr<ShmSegment> ShmSegment::Create(const std::string& name, int rank,
                                              size_t slot_bytes) {
  const size_t bytes = SegmentBytes(slot_bytes);
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0 && errno == EEXIST) {  // The name holds this pid: a dead process's.
    shm_unlink(name.c_str());
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  }
  if (fd < 0) return Errno(absl::StrCat("shm: create ", name), errno);
  ShmSegment segment;
  segment.name_ = name;  // From here the destructor unlinks on failure.
  int err = 0;
  do {
    err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  } while (err == EINTR);
  if (err != 0) {
    close(fd);
    return Errno(
        absl::StrCat("shm: reserve ", bytes, " bytes for ", name, " (is /dev/shm large enough?)"),
        err);
  }
  absl::StatusOr<void*> base = MapShared(fd, bytes, name);
  if (!base.ok()) return base.status();
  segment.base_ = *base;
  segment.bytes_ = bytes;
  segment.slot_bytes_ = slot_bytes;
  ShmHeader* header = new (segment.base_) ShmHeader();
  header->slot_bytes = slot_bytes;
  header->rank = rank;
  header->pid = static_cast<int32_t>(getpid());
  std::atomic_thread_fence(std::memory_order_release);
  header->magic = kShmMagic;
  return segment;
}

absl::StatusOr<ShmSegment> ShmSegment::Open(const std::string& name, int rank, int pid,
                                            size_t slot_bytes) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) return Errno(absl::StrCat("shm: open rank ", rank, "'s segment ", name), errno);
  struct stat st {};
  const size_t bytes = SegmentBytes(slot_bytes);
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return Errno(absl::StrCat("shm: fstat rank ", rank, "'s segment ", name), err);
  }
  if (static_cast<size_t>(st.st_size) != bytes) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("shm: rank ", rank, "'s segment ", name, " is not ", bytes, " bytes"));
  }
  absl::StatusOr<void*> base = MapShared(fd, bytes, name);
  if (!base.ok()) return base.status();
  ShmSegment segment;
  segment.base_ = *base;
  segment.bytes_ = bytes;
  segment.slot_bytes_ = slot_bytes;
  const ShmHeader& h = segment.header();
  if (h.magic != kShmMagic || h.rank != rank || h.pid != pid || h.slot_bytes != slot_bytes) {
    return absl::FailedPreconditionError(
        absl::StrCat("shm: segment ", name, " holds rank ", h.rank, " pid ", h.pid, " slot ",
                     h.slot_bytes, ", expected rank ", rank, " pid ", pid, " slot ", slot_bytes));
  }
  return segment;
}

std::string ShmSegmentName(int rank) {
  static std::atomic<uint64_t> serial{0};
  return absl::StrCat("/zeroshard-", getpid(), "-", serial.fetch_add(1), "-", rank);
}

std::string ShmHostId() {
  std::string boot_id;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, boot_id);
  return absl::StrCat(boot_id, "/", HostName());
}

void FutexWait(std::atomic<uint32_t>& word, uint32_t seen, absl::Duration max_wait) {
  const timespec ts = absl::ToTimespec(max_wait);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr,
          0);
}

bool ProcessVisible(int pid) { return access(absl::StrCat("/proc/", pid).c_str(), F_OK) == 0; }

bool ProcessExited(int pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;
  if (!std::getline(in, stat)) return true;
  // "pid (comm) S ...": the state follows the last ')'.
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return false;
  const char state = stat[paren + 2];
  return state == 'Z' || state == 'X';
}

}  // namespace zeroshard
