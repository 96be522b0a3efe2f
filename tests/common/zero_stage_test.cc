// The stage table (common/zero_stage.h) against ZeRO's definitions
// (Rajbhandari et al., 2020, section 5): stage 0 shards nothing and
// all-reduces at the step; 1 shards the optimizer state (P_os) and
// reduce-scatters the whole gradient at the step, then all-gathers the
// updated parameters; 2 also shards the gradients (P_os+g), reduce-scattered
// during backward; 3 also shards the parameters (P_os+g+p), gathered per use
// and never after the step. Each row is also checked for the consistency the
// engine relies on (each stage shards a superset of the one below).
#include "common/zero_stage.h"

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

struct Want {
  bool optimizer, grads, params;
  GradReduction reduction;
  bool gathers_after_step;
};

TEST(ZeroStage, RowsAreThePapersStages) {
  const Want want[4] = {
      {false, false, false, GradReduction::kAllReduceAtStep, false},
      {true, false, false, GradReduction::kReduceScatterAtStep, true},
      {true, true, false, GradReduction::kReduceScatterInBackward, true},
      {true, true, true, GradReduction::kReduceScatterInBackward, false},
  };
  ASSERT_EQ(ZeroStages().size(), 4u);
  for (int s = 0; s < 4; ++s) {
    const ZeroStage& z = ZeroStageOf(s);
    EXPECT_EQ(&z, &ZeroStages()[s]) << s;
    EXPECT_EQ(z.number, s);
    EXPECT_EQ(z.shards_optimizer, want[s].optimizer) << s;
    EXPECT_EQ(z.shards_grads, want[s].grads) << s;
    EXPECT_EQ(z.shards_params, want[s].params) << s;
    EXPECT_EQ(z.reduction, want[s].reduction) << s;
    EXPECT_EQ(z.gathers_after_step, want[s].gathers_after_step) << s;
    EXPECT_EQ(z.replicated(), s == 0) << s;
  }
}

TEST(ZeroStage, EachStageShardsASupersetOfTheOneBelow) {
  for (const ZeroStage& z : ZeroStages()) {
    EXPECT_TRUE(!z.shards_grads || z.shards_optimizer) << z.number;
    EXPECT_TRUE(!z.shards_params || z.shards_grads) << z.number;
    // Gradients kept as shards can only have been reduced during backward.
    EXPECT_EQ(z.shards_grads, z.reduction == GradReduction::kReduceScatterInBackward) << z.number;
    // A resident whole compute copy over a sharded update needs the gather.
    EXPECT_EQ(z.gathers_after_step, z.shards_optimizer && !z.shards_params) << z.number;
  }
}

TEST(ZeroStage, OnlyZeroToThreeAreStages) {
  for (int s : {0, 1, 2, 3}) EXPECT_TRUE(IsZeroStage(s)) << s;
  for (int s : {-1, 4, 100}) EXPECT_FALSE(IsZeroStage(s)) << s;
  EXPECT_DEATH(ZeroStageOf(4), "ZeroStageOf\\(4\\)");
}

}  // namespace
}  // namespace zeroshard
