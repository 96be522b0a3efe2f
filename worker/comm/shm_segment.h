// One rank's POSIX shared-memory segment for the shm backend
// (shm_communicator.h), and the futex calls its ranks wait and wake with.
//
// Layout: a ShmHeader (one cache line per counter, so ranks spinning on a
// peer's counter do not share lines with its other writes) followed by two
// slots of `slot_bytes` each. Round k of the backend's protocol uses slot
// k % 2.
//
// A segment lives in /dev/shm under a name unique to the creating process
// (ShmSegmentName); the creator unlinks the name once every rank has mapped
// it, so a crash after set-up leaves nothing behind. Its pages are reserved
// at creation (posix_fallocate), so a full /dev/shm is an error then, never
// a SIGBUS later.
//
// Thread safety: the header's counters are atomics, written by their owner
// only and read by everyone; the slots are plain memory ordered by them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace zeroshard {

inline constexpr uint64_t kShmMagic = 0x7a73686d31ULL;  // "zshm1"

struct alignas(64) ShmHeader {
  uint64_t magic = 0;
  uint64_t slot_bytes = 0;
  int32_t rank = -1;
  int32_t pid = 0;
  // Rounds this rank has written into its slot (futex word).
  alignas(64) std::atomic<uint32_t> posted{0};
  // Peers asleep on posted: the writer wakes only when > 0.
  alignas(64) std::atomic<uint32_t> sleepers{0};
  // Set when this rank leaves (Abort, a failed op, its end): peers waiting
  // for a round it has not posted give up at once.
  alignas(64) std::atomic<uint32_t> aborted{0};
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == 4);  // A futex word.

class ShmSegment {
 public:
  ShmSegment() = default;
  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment() { Reset(); }

  // Creates and maps this rank's segment. RESOURCE_EXHAUSTED when /dev/shm
  // has no room for it; UNAVAILABLE for other system errors.
  // A name left by an earlier process with this pid is replaced.
  static absl::StatusOr<ShmSegment> Create(const std::string& name, int rank, size_t slot_bytes);
  // Maps a peer's segment and checks its header names `rank`, `pid` and
  // `slot_bytes`. NOT_FOUND when the name does not exist here (the peer is
  // on another host or in another IPC namespace, or it failed and left);
  // FAILED_PRECONDITION when the header does not match.
  static absl::StatusOr<ShmSegment> Open(const std::string& name, int rank, int pid,
                                         size_t slot_bytes);
  // Removes the name (created segments only); the mapping stays valid.
  void Unlink();

  ShmHeader& header() const { return *static_cast<ShmHeader*>(base_); }
  char* slot(uint32_t round) const;
  size_t slot_bytes() const { return slot_bytes_; }

 private:
  // Unmaps; unlinks too when this process created it and has not yet.
  void Reset();

  void* base_ = nullptr;
  size_t bytes_ = 0;
  size_t slot_bytes_ = 0;
  std::string name_;  // Set while this process owns the name.
};

// A name for this process's segment of `rank`, unique among the process's
// communicators: /zeroshard-<pid>-<serial>-<rank>.
std::string ShmSegmentName(int rank);

// This machine's identity for "are we on one host": the kernel's boot id and
// the host name.
std::string ShmHostId();

// futex(2) on a word of a shared mapping (not FUTEX_PRIVATE). Wait returns
// when the word differs from `seen`, on a wake, or after `max_wait`.
void FutexWait(std::atomic<uint32_t>& word, uint32_t seen, absl::Duration max_wait);
void FutexWakeAll(std::atomic<uint32_t>& word);

// Whether process `pid` is gone or a zombie (/proc/<pid>/stat).
bool ProcessExited(int pid);
// Whether /proc shows process `pid` (false in another pid namespace).
bool ProcessVisible(int pid);

}  // namespace zeroshard
