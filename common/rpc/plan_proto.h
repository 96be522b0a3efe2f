// Conversions between the shard-plan structs (common/shard_plan.h) and their
// protobuf messages (proto/zeroshard/v1/common.proto). Pure; thread-safe.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "common/shard_plan.h"
#include "zeroshard/v1/common.pb.h"

namespace zeroshard {

v1::DType DTypeToProto(DType d);
// INVALID_ARGUMENT for DTYPE_UNSPECIFIED or an unknown value.
absl::StatusOr<DType> DTypeFromProto(v1::DType d);

void UnitSpecsToProto(const std::vector<UnitSpec>& units,
                      google::protobuf::RepeatedPtrField<v1::UnitSpec>* out);
absl::StatusOr<std::vector<UnitSpec>> UnitSpecsFromProto(
    const google::protobuf::RepeatedPtrField<v1::UnitSpec>& units);

void ShardPlanToProto(const ShardPlan& plan, v1::ShardPlan* out);
// Rebuilds the plan from the message's units and recomputes it, so a plan
// read from the wire or disk is always self-consistent. INVALID_ARGUMENT if
// the message disagrees with the recomputed plan.
absl::StatusOr<ShardPlan> ShardPlanFromProto(const v1::ShardPlan& msg);

}  // namespace zeroshard
