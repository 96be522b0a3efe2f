// GatherOrder (common/gather_order.h): the first step is predicted by
// forward-then-backward order; later steps by the gathers the previous step
// made (here the GPT's pattern with its tied unit 0 and the engine's own
// prefetch), and a gather off the expected order resynchronises at that
// unit's first occurrence. Expected lists are written out by hand.
#include "common/gather_order.h"

#include <vector>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

using V = std::vector<int>;

TEST(GatherOrderTest, SeededWithForwardThenBackward) {
  GatherOrder order(3);
  EXPECT_EQ(order.order(), (V{0, 1, 2, 2, 1, 0}));
  EXPECT_EQ(order.Record(0, 2), (V{1, 2}));
  EXPECT_EQ(order.Record(1, 2), (V{2, 2}));
  EXPECT_EQ(order.Record(2, 5), (V{2, 1, 0}));
  EXPECT_EQ(order.Record(2, 2), (V{1, 0}));
  EXPECT_EQ(order.Record(1, 2), (V{0}));
  EXPECT_EQ(order.Record(0, 2), V{});
}

TEST(GatherOrderTest, LearnsTheLastStepsOrder) {
  // Units 0 (tied embedding/head), 1..3 blocks: forward 0 1 2 3 0 (+1 by
  // prefetch), backward 0 3 2 (+0 by prefetch).
  const V step = {0, 1, 2, 3, 0, 1, 0, 3, 2, 0};
  GatherOrder order(4);
  for (int u : step) order.Record(u, 2);
  EXPECT_EQ(order.EndStep(2), (V{0, 1}));
  EXPECT_EQ(order.order(), step);
  for (size_t i = 0; i < step.size(); ++i) {
    V want;
    for (size_t j = i + 1; j < step.size() && want.size() < 3; ++j) want.push_back(step[j]);
    EXPECT_EQ(order.Record(step[i], 3), want) << "gather " << i;
  }
  EXPECT_EQ(order.EndStep(1), (V{0}));
}

TEST(GatherOrderTest, ResynchronisesAfterAnUnexpectedGather) {
  GatherOrder order(4);  // 0 1 2 3 3 2 1 0
  EXPECT_EQ(order.Record(0, 2), (V{1, 2}));
  EXPECT_EQ(order.Record(2, 2), (V{3, 3}));  // Skipped 1: first 2 is at index 2.
  EXPECT_EQ(order.Record(0, 1), (V{1}));     // A new forward pass (eval).
  EXPECT_EQ(order.Record(7, 2), V{});        // Unknown: nothing predicted.
  EXPECT_EQ(order.EndStep(2), (V{0, 2}));    // The step's own gathers: 0 2 0 7.
}

TEST(GatherOrderTest, AStepWithoutGathersKeepsTheOrder) {
  GatherOrder order(2);
  EXPECT_EQ(order.EndStep(2), (V{0, 1}));
  EXPECT_EQ(order.order(), (V{0, 1, 1, 0}));
}

// Buckets: unit 0 weighs 1, blocks 1..3 weigh 4, capacity 8. The seeded
// order 0 1 2 3 3 2 1 0 cuts into [0 1] [2 3 3 2] [1 0]: a run goes on while
// its distinct units fit, and a unit it already holds costs nothing.
TEST(GatherOrderTest, BucketsCutByWeightAndTheWindowCountsBuckets) {
  using B = std::vector<V>;
  GatherOrder order(4);
  order.SetBuckets({1, 4, 4, 4}, 8);
  EXPECT_EQ(order.WindowBuckets(1), (B{{}, {0, 1}}));
  EXPECT_EQ(order.Record(0, 1), (V{1, 2, 3, 3, 2}));  // The rest of [0 1], then [2 3 3 2].
  EXPECT_EQ(order.WindowBuckets(1), (B{{1}, {2, 3}}));
  EXPECT_EQ(order.Record(1, 1), (V{2, 3, 3, 2}));
  EXPECT_EQ(order.WindowBuckets(1), (B{{}, {2, 3}}));
  EXPECT_EQ(order.Record(2, 0), (V{3, 3, 2}));  // Prefetch 0: the bucket's rest.
  EXPECT_EQ(order.WindowBuckets(2), (B{{3, 2}, {1, 0}}));
  EXPECT_TRUE(order.Expects(0, 1));
  EXPECT_FALSE(order.Expects(0, 0));
  for (int u : {3, 3, 2, 1}) order.Record(u, 1);
  EXPECT_EQ(order.Record(0, 1), V{});
  // Recut with unit 1 heavier than the capacity: [0] [1] [2 3 3 2] [1] [0]
  // (a unit too heavy for a bucket is one alone); EndStep cuts the new
  // order (the same gathers) the same way.
  order.SetBuckets({1, 9, 4, 4}, 8);
  EXPECT_EQ(order.EndStep(1), (V{0}));
  EXPECT_EQ(order.WindowBuckets(3), (B{{}, {0}, {1}, {2, 3}}));
}

// Without buckets the window by bucket is the flat window, one unit a bucket.
TEST(GatherOrderTest, WithoutBucketsEachPositionIsABucket) {
  using B = std::vector<V>;
  GatherOrder order(3);  // 0 1 2 2 1 0
  EXPECT_EQ(order.WindowBuckets(2), (B{{}, {0}, {1}}));
  order.Record(0, 2);
  EXPECT_EQ(order.WindowBuckets(3), (B{{}, {1}, {2}, {2}}));
}

}  // namespace
}  // namespace zeroshard
