#include "worker/comm/shm_group.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zeroshard {
namespace {

constexpr int kSpins = 128;
constexpr absl::Duration kLivenessEvery = absl::Milliseconds(20);
constexpr absl::Duration kLongestSleep = absl::Milliseconds(10);

bool Reached(uint32_t value, uint32_t target) { return static_cast<int32_t>(value - target) >= 0; }

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace

ShmGroup::ShmGroup(int rank, std::vector<ShmSegment> segments, std::vector<int> pids)
    : rank_(rank), segments_(std::move(segments)), pids_(std::move(pids)) {}

ShmGroup::~ShmGroup() = default;

void ShmGroup::Publish(uint32_t posted) {
  ShmHeader& own = segments_[rank_].header();
  own.posted.store(posted, std::memory_order_seq_cst);
  if (own.sleepers.load(std::memory_order_seq_cst) > 0) FutexWakeAll(own.posted);
}

absl::Status ShmGroup::PeerGone(int q, absl::Time now, absl::Time& check_liveness) const {
  if (segments_[q].header().aborted.load()) {
    return absl::UnavailableError(absl::StrCat("shm: rank ", q, " left the communicator"));
  }
  if (pids_[q] > 0 && now >= check_liveness) {
    check_liveness = now + kLivenessEvery;
    if (ProcessExited(pids_[q])) {
      return absl::UnavailableError(absl::StrCat("shm: rank ", q, " (pid ", pids_[q], ") exited"));
    }
  }
  return absl::OkStatus();
}

absl::Status ShmGroup::WaitPosted(int q, uint32_t target, absl::Time deadline) {
  ShmHeader& peer = segments_[q].header();
  std::atomic<uint32_t>& word = peer.posted;
  auto reached = [&] { return Reached(word.load(std::memory_order_acquire), target); };
  for (int i = 0; i < kSpins; ++i) {
    if (reached()) return absl::OkStatus();
    CpuRelax();
  }
  absl::Time check_liveness = absl::Now() + kLivenessEvery;
  for (;;) {
    if (reached()) return absl::OkStatus();
    if (aborted_.load()) return absl::AbortedError("communicator aborted");
    const absl::Time now = absl::Now();
    if (absl::Status gone = PeerGone(q, now, check_liveness); !gone.ok()) {
      // A peer posts before it leaves: what it posted still counts.
      return reached() ? absl::OkStatus() : gone;
    }
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "shm: timed out waiting for rank ", q, " (round ", target, ", at ", word.load(), ")"));
    }
    peer.sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = word.load(std::memory_order_seq_cst);
    if (!Reached(seen, target)) FutexWait(word, seen, std::min(deadline - now, kLongestSleep));
    peer.sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
}

void ShmGroup::Abort() {
  aborted_.store(true);
  segments_[rank_].header().aborted.store(1);
  // Wake whoever sleeps on any counter, this rank's own waits included.
  for (ShmSegment& s : segments_) FutexWakeAll(s.header().posted);
}

}  // namespace zeroshard
