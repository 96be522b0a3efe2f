#include "worker/comm/communicator.h"

#include <string>

#include "gtest/gtest.h"

namespace zeroshard {
namespace {

TEST(CommunicatorTest, OpNamesAreMetricLabels) {
  EXPECT_EQ(std::string(CommOpName(CommOp::kAllGather)), "all_gather");
  EXPECT_EQ(std::string(CommOpName(CommOp::kReduceScatter)), "reduce_scatter");
  EXPECT_EQ(std::string(CommOpName(CommOp::kAllReduce)), "all_reduce");
  EXPECT_EQ(std::string(CommOpName(CommOp::kBroadcast)), "broadcast");
  EXPECT_EQ(std::string(CommOpName(CommOp::kBarrier)), "barrier");
}

TEST(CommunicatorTest, BusBandwidthFactorsAsNcclTests) {
  // nccl-tests doc/PERFORMANCE.md: (n-1)/n, 2(n-1)/n, 1.
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CommOp::kAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CommOp::kReduceScatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CommOp::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CommOp::kAllReduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(BusBandwidthFactor(CommOp::kBroadcast, 5), 1.0);
}

}  // namespace
}  // namespace zeroshard
