// ReduceBucket (common/reduce_bucket.h): the groups it hands out for a
// written-out sequence of closed gradients, worked out by hand.
#include "common/reduce_bucket.h"

#include <vector>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

using Groups = std::vector<std::vector<int>>;

TEST(ReduceBucketTest, FillsToCapacityAndGoesFirstWhenItWouldOverflow) {
  Groups issued;
  auto issue = [&](const std::vector<int>& units) { issued.push_back(units); };
  ReduceBucket bucket(10);
  bucket.Add(0, 4, issue);   // [0] 4
  bucket.Add(1, 4, issue);   // [0 1] 8
  bucket.Add(2, 4, issue);   // 12 > 10: [0 1] goes, [2] 4
  bucket.Add(3, 6, issue);   // [2 3] 10: full, goes
  bucket.Add(4, 12, issue);  // Alone past capacity: goes at once
  bucket.Add(5, 3, issue);
  bucket.Flush(issue);  // [5]
  bucket.Flush(issue);  // Nothing left
  EXPECT_EQ(issued, (Groups{{0, 1}, {2, 3}, {4}, {5}}));
}

TEST(ReduceBucketTest, AReopenedUnitLeavesAndRejoinsAtTheEnd) {
  Groups issued;
  auto issue = [&](const std::vector<int>& units) { issued.push_back(units); };
  ReduceBucket bucket(10);
  bucket.Add(0, 4, issue);
  bucket.Add(1, 4, issue);
  EXPECT_TRUE(bucket.Take(0));  // [1] 4
  EXPECT_FALSE(bucket.Take(0));
  EXPECT_FALSE(bucket.Take(7));
  bucket.Add(2, 4, issue);  // [1 2] 8: its bytes left with it
  bucket.Add(0, 2, issue);  // [1 2 0] 10: full
  EXPECT_EQ(issued, (Groups{{1, 2, 0}}));
}

TEST(ReduceBucketTest, WithoutCapacityEveryGradientGoesAlone) {
  Groups issued;
  auto issue = [&](const std::vector<int>& units) { issued.push_back(units); };
  ReduceBucket bucket(0);
  for (int u : {3, 1, 3}) bucket.Add(u, 5, issue);
  EXPECT_FALSE(bucket.Take(3));
  EXPECT_EQ(issued, (Groups{{3}, {1}, {3}}));
}

}  // namespace
}  // namespace zeroshard
