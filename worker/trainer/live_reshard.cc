#include "worker/trainer/live_reshard.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/zero_stage.h"
#include "worker/comm/control_collectives.h"
#include "worker/comm/wait_or_abort.h"

namespace zeroshard {
namespace {

// DescribeHeld's row.
enum Field { kHas, kGeneration, kWorldSize, kAlignment, kStage, kIndex, kStep, kOptStep, kFields };

ElementRange Intersect(ElementRange a, ElementRange b) {
  const int64_t lo = std::max(a.offset, b.offset), hi = std::min(a.end(), b.end());
  return {lo, std::max<int64_t>(0, hi - lo)};
}

// Copies `part` (inside both) from a buffer over `from` into one over `to`.
void CopyPart(const float* from, ElementRange from_range, float* to, ElementRange to_range,
              ElementRange part) {
  if (part.length == 0) return;
  std::memcpy(to + (part.offset - to_range.offset), from + (part.offset - from_range.offset),
              static_cast<size_t>(part.length) * 4);
}

// The old shard `old_index` of a unit, without its padding.
ElementRange OldPiece(const UnitPlan& old_unit, int old_index) {
  return Intersect(old_unit.shard(old_index), {0, old_unit.numel});
}

// Target buffers for one unit: master, m, v over `range`, zero (padding).
struct Target {
  ElementRange range;
  std::vector<float> master, m, v;
};

// Moves one old piece into `target`: locally when only its sender needs it,
// else broadcast from the sender.
absl::Status MovePiece(Communicator& control, const HeldUnit* mine, ElementRange piece, int sender,
                       bool broadcast, Target& target, absl::Duration timeout) {
  const bool sending = sender == control.rank();
  if (sending && (mine == nullptr || Intersect(mine->range, piece).length != piece.length)) {
    return absl::InvalidArgumentError(
        absl::StrCat("held state does not cover elements [", piece.offset, ", ", piece.end(), ")"));
  }
  const ElementRange keep = Intersect(target.range, piece);
  if (!broadcast) {
    if (!sending) return absl::OkStatus();
    CopyPart(mine->master.data(), mine->range, target.master.data(), target.range, keep);
    CopyPart(mine->m.data(), mine->range, target.m.data(), target.range, keep);
    CopyPart(mine->v.data(), mine->range, target.v.data(), target.range, keep);
    return absl::OkStatus();
  }
  const size_t n = static_cast<size_t>(piece.length);
  auto buffer = std::make_shared<std::vector<float>>(3 * n);
  float* b = buffer->data();
  if (sending) {
    CopyPart(mine->master.data(), mine->range, b, piece, piece);
    CopyPart(mine->m.data(), mine->range, b + n, piece, piece);
    CopyPart(mine->v.data(), mine->range, b + 2 * n, piece, piece);
  }
  std::unique_ptr<Work> work =
      control.Broadcast(b, b, 3 * piece.length, DType::kFp32, sender, {timeout});
  if (absl::Status s = WaitOrAbort(control, *work, timeout); !s.ok()) {
    KeepForever(std::shared_ptr<void>(buffer));  // [Note: failed collective buffers]
    return s;
  }
  CopyPart(b, piece, target.master.data(), target.range, keep);
  CopyPart(b + n, piece, target.m.data(), target.range, keep);
  CopyPart(b + 2 * n, piece, target.v.data(), target.range, keep);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<HeldState> SnapshotState(ShardedEngine& engine, uint64_t generation, int64_t step) {
  if (!engine.status().ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot hand off a failed engine's state: ", engine.status().message()));
  }
  const ShardPlan& plan = engine.plan();
  HeldState held;
  held.generation = generation;
  held.world_size = plan.world_size;
  held.alignment = plan.alignment;
  held.stage = engine.options().stage;
  held.index = engine.rank();
  held.step = step;
  held.optimizer_step = engine.optimizer_step();
  for (size_t u = 0; u < plan.units.size(); ++u) {
    HeldUnit unit;
    unit.range = engine.OptimizerShard(static_cast<int>(u)).range;
    for (auto* b : {&unit.master, &unit.m, &unit.v}) b->resize(unit.range.length);
    ZS_RETURN_IF_ERROR(engine.CopyOptimizerState(static_cast<int>(u), unit.range,
                                                 unit.master.data(), unit.m.data(), unit.v.data()));
    held.units.push_back(std::move(unit));
  }
  return held;
}

std::vector<int64_t> DescribeHeld(absl::Span<const HeldState> held) {
  std::vector<int64_t> rows(kHeldSlots * kFields, 0);
  for (size_t k = 0; k < held.size() && k < kHeldSlots; ++k) {
    int64_t* row = &rows[k * kFields];
    const HeldState& h = held[k];
    row[kHas] = 1;
    row[kGeneration] = static_cast<int64_t>(h.generation);
    row[kWorldSize] = h.world_size;
    row[kAlignment] = h.alignment;
    row[kStage] = h.stage;
    row[kIndex] = h.index;
    row[kStep] = h.step;
    row[kOptStep] = h.optimizer_step;
  }
  return rows;
}

namespace {

struct Slot {
  int rank, slot;
  const int64_t* row;
};

// The holders of `step` cover every shard of their plan: fills `out`.
// Returns "" when live, else why not.
std::string TryStep(const std::vector<Slot>& slots, int stage, LiveState& out) {
  const int64_t* first = slots.front().row;
  for (const Slot& s : slots) {
    for (Field f : {kWorldSize, kAlignment, kStage, kOptStep}) {
      if (s.row[f] != first[f]) {
        return absl::StrCat("the holders of generation ", first[kGeneration],
                            " disagree on their state (field ", static_cast<int>(f), ": ", first[f],
                            " vs ", s.row[f], " at rank ", s.rank, ")");
      }
    }
  }
  if (first[kStage] != stage) {
    return absl::StrCat("the held state is sharded for stage ", first[kStage],
                        ", the job runs stage ", stage);
  }
  const int64_t w = first[kWorldSize];
  if (w < 1 || w > 65536) return "the held state names an empty plan";
  out.source.assign(w, -1);
  out.source_slot.assign(w, -1);
  for (const Slot& s : slots) {
    const int64_t j = s.row[kIndex];
    if (j >= 0 && j < w && out.source[j] < 0) {
      out.source[j] = s.rank;
      out.source_slot[j] = s.slot;
    }
  }
  for (int64_t j = 0; j < w; ++j) {
    if (out.source[j] >= 0) continue;
    if (ZeroStageOf(stage).replicated()) {  // Every holder has every element.
      out.source[j] = slots.front().rank;
      out.source_slot[j] = slots.front().slot;
      continue;
    }
    return absl::StrCat("shard ", j, " of generation ", first[kGeneration], "'s plan (", w,
                        " ranks) at step ", first[kStep], " has no live holder");
  }
  out.world_size = static_cast<int>(w);
  out.alignment = first[kAlignment];
  out.stage = static_cast<int>(first[kStage]);
  out.step = first[kStep];
  out.optimizer_step = first[kOptStep];
  return "";
}

}  // namespace

LiveState DecideLiveState(const std::vector<std::vector<int64_t>>& rows, int stage) {
  std::vector<Slot> all;
  std::vector<std::pair<int64_t, int64_t>> tags;  // (generation, step) held.
  for (size_t r = 0; r < rows.size(); ++r) {
    for (int k = 0; k * kFields < static_cast<int>(rows[r].size()); ++k) {
      const int64_t* row = &rows[r][k * kFields];
      if (row[kHas] != 1) continue;
      all.push_back({static_cast<int>(r), k, row});
      tags.emplace_back(row[kGeneration], row[kStep]);
    }
  }
  LiveState out;  // Nobody holds state: not live, nothing to say.
  std::sort(tags.rbegin(), tags.rend());
  tags.erase(std::unique(tags.begin(), tags.end()), tags.end());
  for (const auto& [generation, step] : tags) {  // The newest step every shard has.
    std::vector<Slot> at;
    for (const Slot& s : all) {
      if (s.row[kGeneration] == generation && s.row[kStep] == step) at.push_back(s);
    }
    LiveState tried;
    const std::string why = TryStep(at, stage, tried);
    if (why.empty()) {
      tried.live = true;
      tried.generation = static_cast<uint64_t>(generation);
      return tried;
    }
    if (out.why_not.empty()) out.why_not = why;
  }
  return out;
}

absl::StatusOr<LiveState> AgreeOnLiveState(Communicator& control, absl::Span<const HeldState> held,
                                           int stage, absl::Duration timeout) {
  ZS_ASSIGN_OR_RETURN(const std::vector<int64_t> all,
                      AllGatherControl(control, DescribeHeld(held), timeout));
  constexpr int kRow = kHeldSlots * kFields;
  std::vector<std::vector<int64_t>> rows;
  for (int r = 0; r < control.world_size(); ++r) {
    rows.emplace_back(all.begin() + r * kRow, all.begin() + (r + 1) * kRow);
  }
  return DecideLiveState(rows, stage);
}

absl::StatusOr<std::vector<HeldUnit>> Redistribute(Communicator& control, const LiveState& live,
                                                   absl::Span<const HeldState> held,
                                                   const std::vector<UnitSpec>& units,
                                                   const ShardPlan& target_plan,
                                                   const std::vector<int>& target_index,
                                                   absl::Duration timeout) {
  if (!live.live) return absl::InvalidArgumentError("Redistribute needs a live state");
  ZS_ASSIGN_OR_RETURN(const ShardPlan old_plan,
                      MakeShardPlan(units, live.world_size, live.alignment));
  bool units_match = old_plan.units.size() == target_plan.units.size();
  for (const HeldState& h : held) units_match &= h.units.size() == target_plan.units.size();
  if (!units_match || static_cast<int>(target_index.size()) != control.world_size()) {
    return absl::InvalidArgumentError("the held state's units do not match the model's");
  }
  const int mine = target_index[control.rank()];
  std::vector<HeldUnit> out;
  for (size_t u = 0; u < target_plan.units.size(); ++u) {
    const UnitPlan& new_unit = target_plan.units[u];
    Target target;
    if (mine >= 0) target.range = OptimizerRange(new_unit, live.stage, mine);
    for (auto* b : {&target.master, &target.m, &target.v}) b->assign(target.range.length, 0.0f);
    for (int j = 0; j < live.world_size; ++j) {
      const ElementRange piece = OldPiece(old_plan.units[u], j);
      if (piece.length == 0) continue;
      const int sender = live.source[j];
      bool broadcast = false;
      for (int r = 0; r < control.world_size(); ++r) {
        const int t = target_index[r];
        if (r != sender && t >= 0 &&
            Intersect(OptimizerRange(new_unit, live.stage, t), piece).length > 0) {
          broadcast = true;
        }
      }
      const int slot = live.source_slot[j];
      const HeldUnit* mine_unit =
          sender == control.rank() && slot >= 0 && slot < static_cast<int>(held.size())
              ? &held[slot].units[u]
              : nullptr;
      ZS_RETURN_IF_ERROR(MovePiece(control, mine_unit, piece, sender, broadcast, target, timeout));
    }
    out.push_back(
        {target.range, std::move(target.master), std::move(target.m), std::move(target.v)});
  }
  return out;
}

absl::Status ReshardInto(Communicator& control, const LiveState& live,
                         absl::Span<const HeldState> held, const std::vector<UnitSpec>& units,
                         ShardedEngine& engine, absl::Duration timeout) {
  if (engine.zero_stage().number != live.stage) {
    return absl::InvalidArgumentError("the held state is for another stage");
  }
  std::vector<int> identity(control.world_size());
  for (int r = 0; r < control.world_size(); ++r) identity[r] = r;
  ZS_ASSIGN_OR_RETURN(std::vector<HeldUnit> moved,
                      Redistribute(control, live, held, units, engine.plan(), identity, timeout));
  for (size_t u = 0; u < moved.size(); ++u) {
    ZS_RETURN_IF_ERROR(
        engine.LoadShardState(static_cast<int>(u), moved[u].master, moved[u].m, moved[u].v));
  }
  ZS_RETURN_IF_ERROR(engine.RebuildComputeCopy());
  engine.set_optimizer_step(live.optimizer_step);
  return absl::OkStatus();
}

absl::StatusOr<std::optional<HeldState>> HandOffToSurvivors(Communicator& control,
                                                            const HeldState& mine,
                                                            const std::vector<int>& leaving,
                                                            const std::vector<UnitSpec>& units,
                                                            absl::Duration timeout) {
  const int n = control.world_size();
  std::vector<int> target_index(n);
  int survivors = 0;
  for (int r = 0; r < n; ++r) {
    const bool leaves = std::find(leaving.begin(), leaving.end(), r) != leaving.end();
    target_index[r] = leaves ? -1 : survivors++;
  }
  if (survivors == 0) return std::optional<HeldState>();  // Everyone leaves: nothing to keep.
  HeldState out = mine;
  out.world_size = survivors;
  out.index = target_index[control.rank()];
  if (ZeroStageOf(mine.stage)
          .replicated()) {  // Every rank holds every element: only the labels change.
    if (out.index < 0) return std::optional<HeldState>();
    return std::optional<HeldState>(std::move(out));
  }
  LiveState live;
  live.live = true;
  live.world_size = n;
  live.alignment = mine.alignment;
  live.stage = mine.stage;
  live.source = std::vector<int>(n);
  live.source_slot = std::vector<int>(n, 0);
  for (int r = 0; r < n; ++r) live.source[r] = r;
  ZS_ASSIGN_OR_RETURN(const ShardPlan target, MakeShardPlan(units, survivors, mine.alignment));
  ZS_ASSIGN_OR_RETURN(out.units, Redistribute(control, live, absl::MakeConstSpan(&mine, 1), units,
                                              target, target_index, timeout));
  if (out.index < 0) return std::optional<HeldState>();
  return std::optional<HeldState>(std::move(out));
}

}  // namespace zeroshard
