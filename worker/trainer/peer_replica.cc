#include "worker/trainer/peer_replica.h"

#include <algorithm>
#include <memory>

#include "absl/types/span.h"
#include "common/status_macros.h"
#include "common/zero_stage.h"
#include "worker/comm/wait_or_abort.h"

namespace zeroshard {
namespace {

int64_t HeldBytes(absl::Span<const HeldState> held) {
  int64_t n = 0;
  for (const HeldState& h : held) {
    for (const HeldUnit& u : h.units) n += 3 * 4 * static_cast<int64_t>(u.master.size());
  }
  return n;
}

// Unit `u` of this rank's optimizer state, read from the engine and
// shifted one rank left around the ring: returns the right neighbour's,
// over `theirs` (the same length at stages 1-3).
absl::StatusOr<HeldUnit> ShiftUnit(ShardedEngine& engine, int u, Communicator& control,
                                   ElementRange theirs, absl::Duration timeout) {
  const ElementRange mine = engine.OptimizerShard(u).range;
  const size_t n = static_cast<size_t>(mine.length);
  auto send = std::make_shared<std::vector<float>>(3 * n);
  auto recv = std::make_shared<std::vector<float>>(3 * n);
  float* s = send->data();
  ZS_RETURN_IF_ERROR(engine.CopyOptimizerState(u, mine, s, s + n, s + 2 * n));
  std::unique_ptr<Work> work =
      control.RingShift(s, recv->data(), static_cast<int64_t>(3 * n), DType::kFp32, {timeout});
  if (absl::Status st = WaitOrAbort(control, *work, timeout); !st.ok()) {
    KeepForever(std::shared_ptr<void>(send));  // [Note: failed collective buffers]
    KeepForever(std::shared_ptr<void>(recv));
    return st;
  }
  HeldUnit out;
  out.range = theirs;
  out.master.assign(recv->begin(), recv->begin() + n);
  out.m.assign(recv->begin() + n, recv->begin() + 2 * n);
  out.v.assign(recv->begin() + 2 * n, recv->end());
  return out;
}

// Collective: the ring neighbour's state as of `step`, straight from every
// rank's engine.
absl::StatusOr<HeldState> ReceiveNeighbour(ShardedEngine& engine, Communicator& control,
                                           uint64_t generation, int64_t step,
                                           absl::Duration timeout) {
  const ShardPlan& plan = engine.plan();
  HeldState neighbour;
  neighbour.generation = generation;
  neighbour.world_size = plan.world_size;
  neighbour.alignment = plan.alignment;
  neighbour.stage = engine.options().stage;
  neighbour.index = (engine.rank() + 1) % plan.world_size;
  neighbour.step = step;
  neighbour.optimizer_step = engine.optimizer_step();
  for (size_t u = 0; u < plan.units.size(); ++u) {
    const ElementRange theirs = OptimizerRange(plan.units[u], neighbour.stage, neighbour.index);
    ZS_ASSIGN_OR_RETURN(HeldUnit unit,
                        ShiftUnit(engine, static_cast<int>(u), control, theirs, timeout));
    neighbour.units.push_back(std::move(unit));
  }
  return neighbour;
}

}  // namespace

absl::Status PeerReplica::Refresh(ShardedEngine& engine, Communicator& control, uint64_t generation,
                                  int64_t step, absl::Duration timeout) {
  if (engine.zero_stage().replicated() || control.world_size() == 1) {  // Local only.
    ZS_ASSIGN_OR_RETURN(HeldState own, SnapshotState(engine, generation, step));
    held_.clear();
    held_.push_back(std::move(own));
    Count();
    return absl::OkStatus();
  }
  absl::StatusOr<HeldState> neighbour =
      ReceiveNeighbour(engine, control, generation, step, timeout);
  if (neighbour.ok()) Count(HeldBytes(absl::MakeConstSpan(&*neighbour, 1)));  // Beside held_.
  const absl::Status met =
      neighbour.ok() ? control.Barrier(CollectiveOptions{timeout}) : neighbour.status();
  if (met.ok()) {  // Every rank holds its neighbour's copy of `step`.
    held_.clear();
    held_.push_back(*std::move(neighbour));
    absl::StatusOr<HeldState> own = SnapshotState(engine, generation, step);
    if (own.ok()) held_.push_back(*std::move(own));
    Count();
    return own.status();
  }
  // [Note: a refresh cut short] Keep the last refresh's copies, this rank's
  // own state of `step`, and the neighbour's if it arrived.
  if (absl::StatusOr<HeldState> own = SnapshotState(engine, generation, step); own.ok()) {
    held_.push_back(*std::move(own));
  }
  if (neighbour.ok()) held_.push_back(*std::move(neighbour));
  Count();
  return met;
}

void PeerReplica::Keep(std::vector<HeldState> prior) {
  for (HeldState& h : prior) held_.push_back(std::move(h));
  Count();
}

std::vector<HeldState> PeerReplica::Take() {
  std::vector<HeldState> out = std::move(held_);
  Clear();
  return out;
}

void PeerReplica::Clear() {
  held_.clear();
  Count();
}

void PeerReplica::Count(int64_t in_flight) {
  const int64_t b = HeldBytes(held_) + in_flight;
  bytes_.store(b);
  peak_bytes_.store(std::max(peak_bytes_.load(), b));
}

}  // namespace zeroshard
