// The shard plan: where every parameter and every rank's shard sit inside
// each unit's flat buffer. The one place zeroshard does shard math
// (STYLE.md point 5); everything else asks it.
//
// How it works: a unit's parameters are laid end to end in declaration order
// (numel elements). The buffer is padded up to a multiple of
// world_size * alignment, so every rank's shard has the same length,
// padded_numel / world_size, a multiple of `alignment` elements. Rank r owns
// [r * shard_numel, (r + 1) * shard_numel). Padding is zero and never
// belongs to a parameter. This is FSDP's FlatParameter padding (Zhao et al.,
// VLDB'23, section 3.2) and ZeRO's partitioning (Rajbhandari et al., SC'20,
// section 5): uneven sizes are padded, never refused.
//
// All offsets and lengths are in elements, not bytes. Thread-safe: pure
// functions over values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/dtype.h"

namespace zeroshard {

struct TensorSpec {
  std::string name;            // Unique within the job.
  std::vector<int64_t> shape;  // Elements per dim; empty = scalar.
  DType dtype = DType::kFp32;
};

struct UnitSpec {
  std::string name;
  std::vector<TensorSpec> params;  // In flattening order.
};

struct ParamPlacement {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::kFp32;
  int64_t offset = 0;  // Into the unit's flat buffer.
  int64_t numel = 0;
};

// A half-open element range [offset, offset + length).
struct ElementRange {
  int64_t offset = 0;
  int64_t length = 0;
  int64_t end() const { return offset + length; }
  bool operator==(const ElementRange&) const = default;
};

struct UnitPlan {
  std::string name;
  std::vector<ParamPlacement> params;
  int64_t numel = 0;         // Sum of parameter numels.
  int64_t padded_numel = 0;  // Multiple of world_size * alignment.
  int64_t shard_numel = 0;   // padded_numel / world_size.
  ElementRange shard(int rank) const {
    return {static_cast<int64_t>(rank) * shard_numel, shard_numel};
  }
  // The element offset of parameter `name` in the unit; -1 when it has none
  // (the one lookup of a parameter by name).
  int64_t ParamOffset(absl::string_view name) const;
};

// The shard plan alignment (elements) a job uses unless told otherwise: the
// coordinator's default (CoreOptions::alignment, server/core/coordinator_core.h)
// and what `zeroshard plan` and `launch` size runs with.
inline constexpr int64_t kDefaultShardAlignment = 16;

struct ShardPlan {
  int world_size = 0;
  int64_t alignment = 1;
  std::vector<UnitPlan> units;
  int64_t total_numel() const;         // Sum of unit numels (no padding).
  int64_t total_padded_numel() const;  // Sum of padded numels.
  int64_t total_shard_numel() const;   // Elements one rank owns, all units.
  // The unit named `name`, or null: the one lookup by name.
  const UnitPlan* FindUnit(absl::string_view name) const;
};

// [Note: optimizer range] The range of `unit` whose fp32 master weights and
// AdamW moments rank `rank` holds at ZeRO `stage`: the whole padded buffer
// at stage 0 (plain data parallel: every rank updates everything), the
// rank's shard at stages 1-3 (ZeRO's P_os, Rajbhandari et al. section 5.1).
// The engine, checkpoint restore and save all ask this.
ElementRange OptimizerRange(const UnitPlan& unit, int stage, int rank);

// Upper bound on a unit's elements (2^40): larger inputs are refused as absurd.
inline constexpr int64_t kMaxUnitNumel = int64_t{1} << 40;

// Builds the plan. Errors (INVALID_ARGUMENT, naming the field): world_size
// < 1 or > 65536; alignment < 1 or > 2^20; an empty or duplicate unit or
// parameter name; a negative dimension; a unit larger than kMaxUnitNumel.
absl::StatusOr<ShardPlan> MakeShardPlan(const std::vector<UnitSpec>& units, int world_size,
                                        int64_t alignment);

// One parameter's overlap with an element range of its unit.
struct ParamSlice {
  int param_index = 0;       // Into UnitPlan::params.
  int64_t param_offset = 0;  // First element within the parameter.
  int64_t unit_offset = 0;   // Same element within the unit's flat buffer.
  int64_t length = 0;
};

// The parameters overlapping `range` of `unit`, in order; padding is skipped.
std::vector<ParamSlice> ParamsInRange(const UnitPlan& unit, ElementRange range);

}  // namespace zeroshard
