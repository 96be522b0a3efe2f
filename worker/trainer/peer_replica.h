// Peer redundancy (--redundancy 1): every rank keeps, in host memory, its
// own optimizer state as of the last refresh and a copy of its ring
// neighbour's ((rank + 1) mod N), so when one rank dies the survivors hold
// every shard of the last refreshed step and reshard live from it
// (live_reshard.h) instead of restoring a checkpoint. Two neighbouring
// ranks lost at once lose a shard: the job falls back to the checkpoint.
//
// How it works: Refresh snapshots the engine's state (SnapshotState) and
// ring-shifts it unit by unit over the control communicator
// (Communicator::RingShift: one message to the left neighbour per unit).
// The trainer refreshes after a step's update and before the step record
// (the commit), so the copies never run ahead of what the log shows and no
// step is trained twice. At stage 0 every rank holds everything and only
// the own snapshot is kept. Memory: two optimizer shards (24 bytes a
// parameter of the shard, fp32 master, m, v twice), plus one unit's worth
// transiently; counted as the "redundancy" kind (MemoryByKind).
//
// Thread safety: the training thread only; bytes() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"
#include "worker/engine/sharded_engine.h"
#include "worker/trainer/live_reshard.h"

namespace zeroshard {

class PeerReplica {
 public:
  // Collective over `control`: keeps this rank's state as of `step` and its
  // neighbour's. The previous copies are dropped first; on an error none
  // are kept (the job falls back to the checkpoint if a rank dies next).
  absl::Status Refresh(ShardedEngine& engine, Communicator& control, uint64_t generation,
                       int64_t step, absl::Duration timeout);
  // The copies (own first), moved out for the next generation; empties this.
  std::vector<HeldState> Take();
  void Clear();
  int64_t bytes() const { return bytes_.load(); }
  int64_t peak_bytes() const { return peak_bytes_.load(); }

 private:
  void Count();
  std::vector<HeldState> held_;  // [own, neighbour] or empty.
  std::atomic<int64_t> bytes_{0};
  std::atomic<int64_t> peak_bytes_{0};
};

}  // namespace zeroshard
