// Resharding restore: which elements of a checkpoint fill a range of a unit
// under the CURRENT shard plan.
//
// How it works: a unit's parameters sit at the same element offsets in every
// plan (they are laid end to end from 0; only the zero padding after `numel`
// depends on world size and alignment). So a range [a, b) of the new padded
// buffer takes [a, min(b, numel)) from the checkpoint at the same offsets and
// is zero from max(a, numel) on. Units are matched by name; their parameter
// placements (names, shapes, offsets) must be identical in both plans.
// Offsets and lengths are elements. Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/shard_plan.h"

namespace zeroshard::checkpoint {

// One piece of a restore target.
struct RestoreSegment {
  ElementRange dst;        // Within the target's range, relative to its start.
  bool zero = false;       // Padding: fill with 0 instead of downloading.
  int64_t src_offset = 0;  // Element offset in the checkpoint's unit (when !zero).
};

// Segments covering `range` of `unit` in `new_plan`, in order.
// FAILED_PRECONDITION (naming the unit) if the unit is missing from the
// checkpoint's plan or its parameters differ; INVALID_ARGUMENT if `range`
// exceeds the new padded buffer.
absl::StatusOr<std::vector<RestoreSegment>> PlanRestore(const ShardPlan& checkpoint_plan,
                                                        const ShardPlan& new_plan,
                                                        const std::string& unit,
                                                        ElementRange range);

// The range of each unit rank `rank` uploads when saving: always its shard,
// whatever the stage (a stage-0 rank holds everything but sends only its
// slice, so ranks share the upload).
std::vector<ElementRange> SaveRanges(const ShardPlan& plan, int rank);

}  // namespace zeroshard::checkpoint
