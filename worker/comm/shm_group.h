// The shm backend's round protocol over every rank's segment (shm_segment.h).
//
// Every collective is a sequence of rounds, the same on every rank (ops run
// in issue order). In round k each rank writes its contribution into its own
// slot k % 2, publishes posted = k + 1, waits until every peer has posted
// k + 1, and reads their slots. Two slots let a fast rank write round k + 1
// while slow peers still read round k, and no more is needed: a rank writes
// slot k % 2 again in round k + 2 only after every peer posted round k + 1,
// which each did after it finished reading round k. `posted` is a
// release/acquire pair around the slot data. A waiter spins briefly, then
// sleeps on the peer's counter (futex); a writer wakes only when someone
// sleeps (ShmHeader::sleepers).
//
// A wait gives up with DEADLINE_EXCEEDED at its deadline, ABORTED after this
// rank's Abort, and UNAVAILABLE when the peer aborted (a failed or finished
// communicator) or its process exited (checked every 20 ms of waiting,
// where /proc shows the peer's process) without having posted the round.
//
// Thread safety: one thread runs the rounds (the communicator's queue);
// Abort may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "worker/comm/shm_segment.h"

namespace zeroshard {

class ShmGroup {
 public:
  // segments[q] is rank q's mapping (segments[rank] this rank's own);
  // pids[q] its process (0: not visible here, no liveness check).
  ShmGroup(int rank, std::vector<ShmSegment> segments, std::vector<int> pids);
  ~ShmGroup();

  int rank() const { return rank_; }
  int world_size() const { return static_cast<int>(segments_.size()); }
  size_t slot_bytes() const { return segments_[rank_].slot_bytes(); }

  // One round: write(own slot) fills this rank's contribution, read() runs
  // once every rank's is posted and may read any slot(q).
  template <typename Write, typename Read>
  absl::Status Round(absl::Time deadline, Write&& write, Read&& read) {
    if (aborted_.load()) return absl::AbortedError("communicator aborted");
    write(segments_[rank_].slot(round_));
    Publish(round_ + 1);
    for (int q = 0; q < world_size(); ++q) {
      if (q != rank_) ZS_RETURN_IF_ERROR(WaitPosted(q, round_ + 1, deadline));
    }
    read();
    ++round_;
    return absl::OkStatus();
  }
  // Rank q's slot of the round being read.
  const char* slot(int q) const { return segments_[q].slot(round_); }

  // Removes this rank's segment name (once every peer has mapped it).
  void UnlinkOwn() { segments_[rank_].Unlink(); }

  // Ends this rank's part: its waits return ABORTED, its peers' waits on it
  // UNAVAILABLE.
  void Abort();

 private:
  absl::Status WaitPosted(int q, uint32_t target, absl::Time deadline);
  // Why rank q cannot post (aborted, exited), or OK while it still may.
  absl::Status PeerGone(int q, absl::Time now, absl::Time& check_liveness) const;
  void Publish(uint32_t posted);

  const int rank_;
  std::vector<ShmSegment> segments_;
  std::vector<int> pids_;
  uint32_t round_ = 0;  // Queue thread only; wraps (counters compare by difference).
  std::atomic<bool> aborted_{false};
};

}  // namespace zeroshard
