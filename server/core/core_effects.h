// What the coordinator's core decides under its lock and applies after it
// (the shape of raft's Ready/Advance): the durable writes and the log
// lines of one call. Applying them outside the core's mutex means a slow
// disk (an fsync per write) or a blocked stderr never holds up heartbeats,
// the rendezvous store or status reads.
//
// CoordinatorCore collects them in CoreEffects while it holds its mutex and
// takes a ticket; its scoped lock (EffectsLock) releases the mutex and then
// applies the effects when every earlier ticket has been applied: calls
// apply in the order they held the core's lock, so the file always holds
// the newest decision, and nobody waits on a disk while holding the core's
// mutex. One exception: the decision that ends the job is written before the
// mutex is released (waiting its turn while holding it), so no worker can
// see COMPLETED or FAILED, and exit, before it is on disk.
//
// Thread safety: CoreEffects is guarded by the core's mutex; Apply runs
// under the apply mutex only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zeroshard::server {

class DurableState;

struct CoreEffects {
  struct Lifecycle {
    int64_t failures = 0;
    std::string ended;  // "completed", "failed" or "" (DurableState::SetLifecycle).
    std::string reason;
  };
  // The latest of each (an earlier one in the same call is superseded).
  std::optional<uint64_t> generation;
  std::optional<Lifecycle> lifecycle;
  struct LastStep {
    int64_t step = 0;
    double loss = 0;
  };
  std::optional<LastStep> last_step;    // DurableState::SetLastStep (keeps the highest).
  std::vector<std::string> log;         // Lines for stderr, in order, without the newline.
  bool durable_before_visible = false;  // Apply before the core's mutex is released.

  bool empty() const { return !generation && !lifecycle && !last_step && log.empty(); }
  // Writes to `durable` (a failed write is logged and serving goes on: the
  // next change writes again; a restart at worst forgets the newest
  // failures, and the restart bump keeps generation numbers increasing),
  // then prints the log lines.
  void Apply(DurableState& durable) const;
};

}  // namespace zeroshard::server
