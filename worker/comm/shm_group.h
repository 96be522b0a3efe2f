// The shm backend's round protocol over every rank's segment (shm_segment.h).
//
// Every collective is a sequence of rounds, the same on every rank (ops run
// in issue order). In round k each rank
//   1. waits until every peer has consumed round k - 2, which used the same
//      slot (k % 2), so its slot is free to overwrite;
//   2. writes its contribution into its own slot and publishes posted = k+1;
//   3. waits until every peer has posted k + 1, then reads their slots;
//   4. publishes consumed = k + 1.
// Two slots let a fast rank write round k + 1 while slow peers still read
// round k. The counters are release/acquire pairs around the slot data. A
// waiter spins briefly, then sleeps on the peer's counter (futex); a writer
// wakes only when someone sleeps (ShmHeader::sleepers).
//
// A wait gives up with DEADLINE_EXCEEDED at its deadline, ABORTED after this
// rank's Abort, and UNAVAILABLE when the peer aborted or its process exited
// (checked every 20 ms of waiting).
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
  // pids[q] its process.
  ShmGroup(int rank, std::vector<ShmSegment> segments, std::vector<int> pids);
  ~ShmGroup();

  int rank() const { return rank_; }
  int world_size() const { return static_cast<int>(segments_.size()); }
  size_t slot_bytes() const { return segments_[rank_].slot_bytes(); }

  // One round: write(own slot) fills this rank's contribution, read() runs
  // once every rank's is posted and may read any slot(q).
  template <typename Write, typename Read>
  absl::Status Round(absl::Time deadline, Write&& write, Read&& read) {
    ZS_RETURN_IF_ERROR(WaitPeers(&ShmHeader::consumed, round_ - 1, deadline, round_ >= 2));
    write(segments_[rank_].slot(round_));
    Publish(segments_[rank_].header().posted, round_ + 1);
    ZS_RETURN_IF_ERROR(WaitPeers(&ShmHeader::posted, round_ + 1, deadline, true));
    read();
    Publish(segments_[rank_].header().consumed, round_ + 1);
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
  absl::Status WaitPeers(std::atomic<uint32_t> ShmHeader::*word, uint32_t target,
                         absl::Time deadline, bool needed);
  absl::Status WaitOne(int q, std::atomic<uint32_t> ShmHeader::*word, uint32_t target,
                       absl::Time deadline);
  void Publish(std::atomic<uint32_t>& word, uint32_t value);

  const int rank_;
  std::vector<ShmSegment> segments_;
  std::vector<int> pids_;
  uint32_t round_ = 0;  // Queue thread only; wraps (counters compare by difference).
  std::atomic<bool> aborted_{false};
};

}  // namespace zeroshard
