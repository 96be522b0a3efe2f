// Peer redundancy (--redundancy 1): every rank keeps, in host memory, its
// own optimizer state as of the last refresh and a copy of its ring
// neighbour's ((rank + 1) mod N), so when one rank dies the survivors hold
// every shard of the last refreshed step and reshard live from it
// (live_reshard.h) instead of restoring a checkpoint. Two neighbouring
// ranks lost at once lose a shard: the job falls back to the checkpoint.
//
// How it works: Refresh ring-shifts this rank's state, read unit by unit
// from the engine, over the control communicator (Communicator::RingShift:
// one message to the left neighbour per unit), then meets the others at a
// barrier; only once every rank holds its neighbour's copy does it drop the
// last refresh's copies and snapshot its own (SnapshotState). A refresh cut
// short by a lost rank keeps the last refresh's copies, this rank's own
// state of the new step and the neighbour's if it arrived ([Note: a refresh
// cut short]), so the survivors always hold every shard of one step.
// The trainer refreshes when a generation starts and after a step's update,
// before the step record (the commit), so the copies never run ahead of
// what the log shows; with --redundancy-every 1 (the default) no step is
// trained twice, with K > 1 up to K - 1 recorded steps are. At stage 0 or N = 1
// every rank holds everything and only the own snapshot is kept.
// Memory: two optimizer shards (24 bytes a parameter of the shard, fp32
// master, m, v twice); during a refresh a third (the new neighbour copy)
// plus one unit's send and receive buffers; counted as the "redundancy"
// kind (MemoryByKind).
//
// [Note: a refresh cut short] Rank D dies during the refresh of step s.
// Its left neighbour L may or may not have D's shard of s. If it has, every
// survivor holds its own shard of s and L holds D's: the job goes on from
// s. If it has not, nobody passed the barrier, so every rank still holds
// the last refresh's copies (step s - k) and L holds D's of s - k: the job
// goes on from s - k, and s was never recorded. A rank that passed the
// barrier knows every rank holds its neighbour's copy of s.
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
  // neighbour's. On an error (the communicator's: a rank was lost) it keeps
  // what the note above says and returns the error.
  absl::Status Refresh(ShardedEngine& engine, Communicator& control, uint64_t generation,
                       int64_t step, absl::Duration timeout);
  // Holds `prior`, the state this generation started from (LoadBestState's
  // live reshard), beside the copies until the first refresh passes: a
  // rank lost before then leaves the survivors that state to go on from.
  void Keep(std::vector<HeldState> prior);
  // The copies, moved out for the next generation; empties this.
  std::vector<HeldState> Take();
  void Clear();
  int64_t bytes() const { return bytes_.load(); }
  int64_t peak_bytes() const { return peak_bytes_.load(); }

 private:
  void Count(int64_t in_flight = 0);
  // [neighbour, own], [own] or empty, or what Keep added; after a refresh
  // cut short, up to four (kHeldSlots): two of the last refresh or Keep's
  // (own and neighbour of one step), two of the new step.
  std::vector<HeldState> held_;
  std::atomic<int64_t> bytes_{0};
  std::atomic<int64_t> peak_bytes_{0};
};

}  // namespace zeroshard
