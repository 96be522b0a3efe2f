#include "worker/checkpoint/reshard.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace zeroshard::checkpoint {
namespace {

bool SameParams(const UnitPlan& a, const UnitPlan& b) {
  if (a.numel != b.numel || a.params.size() != b.params.size()) return false;
  for (size_t i = 0; i < a.params.size(); ++i) {
    const ParamPlacement& x = a.params[i];
    const ParamPlacement& y = b.params[i];
    if (x.name != y.name || x.shape != y.shape || x.offset != y.offset || x.numel != y.numel)
      return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<RestoreSegment>> PlanRestore(const ShardPlan& checkpoint_plan,
                                                        const ShardPlan& new_plan,
                                                        const std::string& unit,
                                                        ElementRange range) {
  const UnitPlan* old_u = checkpoint_plan.FindUnit(unit);
  const UnitPlan* new_u = new_plan.FindUnit(unit);
  if (old_u == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("unit \"", unit, "\" is not in the checkpoint"));
  }
  if (new_u == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unit \"", unit, "\" is not in the current plan"));
  }
  if (!SameParams(*old_u, *new_u)) {
    return absl::FailedPreconditionError(
        absl::StrCat("unit \"", unit, "\" has different parameters in the checkpoint (",
                     old_u->numel, " elements) than in the current model (", new_u->numel, ")"));
  }
  if (range.offset < 0 || range.length < 0 || range.end() > new_u->padded_numel) {
    return absl::InvalidArgumentError(absl::StrCat("range [", range.offset, ", ", range.end(),
                                                   ") exceeds unit \"", unit, "\"'s ",
                                                   new_u->padded_numel, " elements"));
  }
  std::vector<RestoreSegment> out;
  const int64_t data_end = std::min(range.end(), new_u->numel);
  if (range.offset < data_end) {
    out.push_back({{0, data_end - range.offset}, false, range.offset});
  }
  const int64_t pad_begin = std::max(range.offset, new_u->numel);
  if (pad_begin < range.end()) {
    out.push_back({{pad_begin - range.offset, range.end() - pad_begin}, true, 0});
  }
  return out;
}

std::vector<ElementRange> SaveRanges(const ShardPlan& plan, int rank) {
  std::vector<ElementRange> out;
  for (const UnitPlan& u : plan.units) out.push_back(u.shard(rank));
  return out;
}

}  // namespace zeroshard::checkpoint
