// PlanRestore (worker/checkpoint/reshard.h): a restore target's range split
// into pieces of the saved plan's data and zero padding, and a checkpoint
// of another model refused.
#include "gtest/gtest.h"
#include "tests/server/checkpoint/checkpoint_test_util.h"
#include "worker/checkpoint/reshard.h"

namespace zeroshard::testing {
namespace {

TEST(ReshardTest, PlanRestoreSplitsDataAndPaddingAndRefusesOtherModels) {
  const ShardPlan old_plan = *MakeShardPlan(OddUnits(), 4, 4);
  const ShardPlan new_plan = *MakeShardPlan(OddUnits(), 3, 8);
  const UnitPlan& u = new_plan.units[3];  // "head": 9 elements.
  auto segs = checkpoint::PlanRestore(old_plan, new_plan, u.name, {4, u.padded_numel - 4});
  ASSERT_TRUE(segs.ok());
  ASSERT_EQ(segs->size(), 2u);
  EXPECT_EQ((*segs)[0].dst, (ElementRange{0, 5}));
  EXPECT_EQ((*segs)[0].src_offset, 4);
  EXPECT_TRUE((*segs)[1].zero);
  EXPECT_EQ((*segs)[1].dst, (ElementRange{5, u.padded_numel - 9}));
  auto other = OddUnits();
  other[3].params[0].shape = {9};
  const ShardPlan changed = *MakeShardPlan(other, 3, 8);
  EXPECT_EQ(checkpoint::PlanRestore(old_plan, changed, "head", {0, 1}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(
      checkpoint::PlanRestore(old_plan, new_plan, "head", {0, u.padded_numel + 1}).status().code(),
      absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zeroshard::testing
