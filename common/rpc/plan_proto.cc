#include "common/rpc/plan_proto.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace zeroshard {

v1::DType DTypeToProto(DType d) { return static_cast<v1::DType>(static_cast<int>(d)); }

absl::StatusOr<DType> DTypeFromProto(v1::DType d) {
  switch (d) {
    case v1::DTYPE_FP32:
      return DType::kFp32;
    case v1::DTYPE_BF16:
      return DType::kBf16;
    case v1::DTYPE_FP16:
      return DType::kFp16;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("dtype ", static_cast<int>(d), " is not valid"));
  }
}

void UnitSpecsToProto(const std::vector<UnitSpec>& units,
                      google::protobuf::RepeatedPtrField<v1::UnitSpec>* out) {
  out->Clear();
  for (const UnitSpec& u : units) {
    v1::UnitSpec* m = out->Add();
    m->set_name(u.name);
    for (const TensorSpec& t : u.params) {
      v1::TensorSpec* tm = m->add_params();
      tm->set_name(t.name);
      for (int64_t d : t.shape) tm->add_shape(d);
      tm->set_dtype(DTypeToProto(t.dtype));
    }
  }
}

absl::StatusOr<std::vector<UnitSpec>> UnitSpecsFromProto(
    const google::protobuf::RepeatedPtrField<v1::UnitSpec>& units) {
  std::vector<UnitSpec> out;
  for (const v1::UnitSpec& m : units) {
    UnitSpec u{m.name(), {}};
    for (const v1::TensorSpec& tm : m.params()) {
      TensorSpec t{tm.name(), {tm.shape().begin(), tm.shape().end()}, DType::kFp32};
      ZS_ASSIGN_OR_RETURN(t.dtype, DTypeFromProto(tm.dtype()));
      u.params.push_back(std::move(t));
    }
    out.push_back(std::move(u));
  }
  return out;
}

void ShardPlanToProto(const ShardPlan& plan, v1::ShardPlan* out) {
  out->Clear();
  out->set_world_size(plan.world_size);
  out->set_alignment(plan.alignment);
  for (const UnitPlan& u : plan.units) {
    v1::UnitPlan* um = out->add_units();
    um->set_name(u.name);
    um->set_numel(u.numel);
    um->set_padded_numel(u.padded_numel);
    for (const ParamPlacement& p : u.params) {
      v1::ParamPlacement* pm = um->add_params();
      pm->set_name(p.name);
      for (int64_t d : p.shape) pm->add_shape(d);
      pm->set_dtype(DTypeToProto(p.dtype));
      pm->set_offset(p.offset);
      pm->set_numel(p.numel);
    }
    for (int r = 0; r < plan.world_size; ++r) {
      v1::Shard* s = um->add_shards();
      s->set_rank(r);
      s->set_offset(u.shard(r).offset);
      s->set_length(u.shard(r).length);
    }
  }
}

absl::StatusOr<ShardPlan> ShardPlanFromProto(const v1::ShardPlan& msg) {
  std::vector<UnitSpec> units;
  for (const v1::UnitPlan& um : msg.units()) {
    UnitSpec u{um.name(), {}};
    for (const v1::ParamPlacement& pm : um.params()) {
      TensorSpec t{pm.name(), {pm.shape().begin(), pm.shape().end()}, DType::kFp32};
      ZS_ASSIGN_OR_RETURN(t.dtype, DTypeFromProto(pm.dtype()));
      u.params.push_back(std::move(t));
    }
    units.push_back(std::move(u));
  }
  ZS_ASSIGN_OR_RETURN(ShardPlan plan, MakeShardPlan(units, msg.world_size(), msg.alignment()));
  for (int i = 0; i < msg.units_size(); ++i) {
    if (msg.units(i).padded_numel() != plan.units[i].padded_numel) {
      return absl::InvalidArgumentError(absl::StrCat(
          "plan unit '", msg.units(i).name(), "' padded_numel ", msg.units(i).padded_numel(),
          " disagrees with the recomputed ", plan.units[i].padded_numel));
    }
  }
  return plan;
}

}  // namespace zeroshard
