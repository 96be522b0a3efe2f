#include "common/shard_plan.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/zero_stage.h"

namespace zeroshard {
namespace {

absl::StatusOr<int64_t> CheckedNumel(const TensorSpec& t) {
  int64_t numel = 1;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    const int64_t dim = t.shape[d];
    if (dim < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("param '", t.name, "' shape[", d, "] = ", dim, " is negative"));
    }
    if (dim != 0 && numel > kMaxUnitNumel / dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("param '", t.name, "' has more than 2^40 elements"));
    }
    numel *= dim;
  }
  return numel;
}

absl::StatusOr<UnitPlan> PlanUnit(const UnitSpec& spec, int world_size, int64_t alignment,
                                  std::set<std::string>& names) {
  if (spec.name.empty()) return absl::InvalidArgumentError("unit name is empty");
  UnitPlan unit;
  unit.name = spec.name;
  for (const TensorSpec& t : spec.params) {
    if (t.name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unit '", spec.name, "' has a param with an empty name"));
    }
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("param name '", t.name, "' is duplicated"));
    }
    ZS_ASSIGN_OR_RETURN(const int64_t numel, CheckedNumel(t));
    if (unit.numel + numel > kMaxUnitNumel) {
      return absl::InvalidArgumentError(
          absl::StrCat("unit '", spec.name, "' has more than 2^40 elements"));
    }
    unit.params.push_back({t.name, t.shape, t.dtype, unit.numel, numel});
    unit.numel += numel;
  }
  const int64_t quantum = world_size * alignment;
  unit.padded_numel = (unit.numel + quantum - 1) / quantum * quantum;
  unit.shard_numel = unit.padded_numel / world_size;
  return unit;
}

}  // namespace

absl::StatusOr<ShardPlan> MakeShardPlan(const std::vector<UnitSpec>& units, int world_size,
                                        int64_t alignment) {
  if (world_size < 1 || world_size > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("world_size = ", world_size, " is outside [1, 65536]"));
  }
  if (alignment < 1 || alignment > (int64_t{1} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat("alignment = ", alignment, " is outside [1, 2^20]"));
  }
  ShardPlan plan;
  plan.world_size = world_size;
  plan.alignment = alignment;
  std::set<std::string> unit_names, param_names;
  for (const UnitSpec& spec : units) {
    if (!unit_names.insert(spec.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("unit name '", spec.name, "' is duplicated"));
    }
    ZS_ASSIGN_OR_RETURN(UnitPlan unit, PlanUnit(spec, world_size, alignment, param_names));
    plan.units.push_back(std::move(unit));
  }
  return plan;
}

int64_t UnitPlan::ParamOffset(absl::string_view name) const {
  for (const ParamPlacement& p : params) {
    if (p.name == name) return p.offset;
  }
  return -1;
}

const UnitPlan* ShardPlan::FindUnit(absl::string_view name) const {
  for (const UnitPlan& u : units) {
    if (u.name == name) return &u;
  }
  return nullptr;
}

ElementRange OptimizerRange(const UnitPlan& unit, int stage, int rank) {
  return ZeroStageOf(stage).shards_optimizer ? unit.shard(rank)
                                             : ElementRange{0, unit.padded_numel};
}

int64_t ShardPlan::total_numel() const {
  int64_t n = 0;
  for (const UnitPlan& u : units) n += u.numel;
  return n;
}

int64_t ShardPlan::total_padded_numel() const {
  int64_t n = 0;
  for (const UnitPlan& u : units) n += u.padded_numel;
  return n;
}

int64_t ShardPlan::total_shard_numel() const {
  int64_t n = 0;
  for (const UnitPlan& u : units) n += u.shard_numel;
  return n;
}

std::vector<ParamSlice> ParamsInRange(const UnitPlan& unit, ElementRange range) {
  std::vector<ParamSlice> out;
  for (size_t i = 0; i < unit.params.size(); ++i) {
    const ParamPlacement& p = unit.params[i];
    const int64_t begin = std::max(range.offset, p.offset);
    const int64_t end = std::min(range.end(), p.offset + p.numel);
    if (begin >= end) continue;
    out.push_back({static_cast<int>(i), begin - p.offset, begin, end - begin});
  }
  return out;
}

}  // namespace zeroshard
