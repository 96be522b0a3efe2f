#include "worker/trainer/peer_replica.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "common/status_macros.h"
#include "worker/comm/wait_or_abort.h"

namespace zeroshard {
namespace {

int64_t HeldBytes(const std::vector<HeldState>& held) {
  int64_t n = 0;
  for (const HeldState& h : held) {
    for (const HeldUnit& u : h.units) n += 3 * 4 * static_cast<int64_t>(u.master.size());
  }
  return n;
}

// One unit's state shifted one rank left around the ring: returns the right
// neighbour's over `theirs` (the same length at stages 1-3).
absl::StatusOr<HeldUnit> ShiftUnit(Communicator& control, const HeldUnit& mine,
                                   ElementRange theirs, absl::Duration timeout) {
  const size_t n = mine.master.size();
  auto send = std::make_shared<std::vector<float>>(3 * n);
  auto recv = std::make_shared<std::vector<float>>(3 * n);
  std::memcpy(send->data(), mine.master.data(), n * 4);
  std::memcpy(send->data() + n, mine.m.data(), n * 4);
  std::memcpy(send->data() + 2 * n, mine.v.data(), n * 4);
  std::unique_ptr<Work> work = control.RingShift(send->data(), recv->data(),
                                                 static_cast<int64_t>(3 * n), DType::kFp32,
                                                 {timeout});
  if (absl::Status s = WaitOrAbort(control, *work, timeout); !s.ok()) {
    KeepForever(std::shared_ptr<void>(send));  // [Note: failed collective buffers]
    KeepForever(std::shared_ptr<void>(recv));
    return s;
  }
  HeldUnit out;
  out.range = theirs;
  out.master.assign(recv->begin(), recv->begin() + n);
  out.m.assign(recv->begin() + n, recv->begin() + 2 * n);
  out.v.assign(recv->begin() + 2 * n, recv->end());
  return out;
}

}  // namespace

absl::Status PeerReplica::Refresh(ShardedEngine& engine, Communicator& control,
                                  uint64_t generation, int64_t step, absl::Duration timeout) {
  Clear();
  ZS_ASSIGN_OR_RETURN(HeldState own, SnapshotState(engine, generation, step));
  const int n = control.world_size();
  std::vector<HeldState> held;
  if (own.stage > 0 && n > 1) {
    HeldState neighbour;
    neighbour.generation = own.generation;
    neighbour.world_size = own.world_size;
    neighbour.alignment = own.alignment;
    neighbour.stage = own.stage;
    neighbour.index = (own.index + 1) % n;
    neighbour.step = own.step;
    neighbour.optimizer_step = own.optimizer_step;
    const ShardPlan& plan = engine.plan();
    for (size_t u = 0; u < own.units.size(); ++u) {
      const ElementRange theirs = OptimizerRange(plan.units[u], own.stage, neighbour.index);
      ZS_ASSIGN_OR_RETURN(HeldUnit unit, ShiftUnit(control, own.units[u], theirs, timeout));
      neighbour.units.push_back(std::move(unit));
    }
    held.push_back(std::move(own));
    held.push_back(std::move(neighbour));
  } else {
    held.push_back(std::move(own));
  }
  held_ = std::move(held);
  Count();
  return absl::OkStatus();
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

void PeerReplica::Count() {
  const int64_t b = HeldBytes(held_);
  bytes_.store(b);
  peak_bytes_.store(std::max(peak_bytes_.load(), b));
}

}  // namespace zeroshard
