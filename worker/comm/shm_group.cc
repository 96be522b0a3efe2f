#include "worker/comm/shm_group.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zeroshard {
namespace {

constexpr int kSpins = 128;
constexpr absl::Duration kLivenessEvery = absl::Milliseconds(20);
constexpr absl::Duration kLongestSleep = absl::Milliseconds(10);

bool Reached(uint32_t value, uint32_t target) {
  return static_cast<int32_t>(value - target) >= 0;
}

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

void ShmGroup::Publish(std::atomic<uint32_t>& word, uint32_t value) {
  word.store(value, std::memory_order_seq_cst);
  if (segments_[rank_].header().sleepers.load(std::memory_order_seq_cst) > 0) FutexWakeAll(word);
}

absl::Status ShmGroup::WaitPeers(std::atomic<uint32_t> ShmHeader::*word, uint32_t target,
                                 absl::Time deadline, bool needed) {
  if (!needed) return absl::OkStatus();
  for (int q = 0; q < world_size(); ++q) {
    if (q != rank_) ZS_RETURN_IF_ERROR(WaitOne(q, word, target, deadline));
  }
  return absl::OkStatus();
}

absl::Status ShmGroup::WaitOne(int q, std::atomic<uint32_t> ShmHeader::*member, uint32_t target,
                               absl::Time deadline) {
  ShmHeader& peer = segments_[q].header();
  std::atomic<uint32_t>& word = peer.*member;
  for (int i = 0; i < kSpins; ++i) {
    if (Reached(word.load(std::memory_order_acquire), target)) return absl::OkStatus();
    CpuRelax();
  }
  absl::Time check_liveness = absl::Now() + kLivenessEvery;
  for (;;) {
    // The word first: a peer that posted and then left (its job done) has
    // still posted.
    if (Reached(word.load(std::memory_order_acquire), target)) return absl::OkStatus();
    if (aborted_.load()) return absl::AbortedError("communicator aborted");
    if (peer.aborted.load()) {
      return absl::UnavailableError(absl::StrCat("shm: rank ", q, " left the communicator"));
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "shm: timed out waiting for rank ", q, " (round ", target, ", at ", word.load(), ")"));
    }
    if (now >= check_liveness) {
      if (ProcessExited(pids_[q])) {
        return absl::UnavailableError(
            absl::StrCat("shm: rank ", q, " (pid ", pids_[q], ") exited"));
      }
      check_liveness = now + kLivenessEvery;
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
  for (ShmSegment& s : segments_) {
    FutexWakeAll(s.header().posted);
    FutexWakeAll(s.header().consumed);
  }
}

}  // namespace zeroshard
