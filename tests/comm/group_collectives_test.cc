// Grouped collectives (communicator.h AllGatherGroup, ReduceScatterGroup)
// on the CPU backends against references computed in the test: members of
// several counts (one empty, one in place), laid across the shm backend's
// 4 KiB slots, over the backends x world sizes x counts x dtypes of
// collectives_fixture.h. Each group is one op in the backend's stats, and
// the ops after a group still pair up (a single op follows every group).
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "tests/comm/collectives_fixture.h"

namespace zeroshard::testing {
namespace {

class GroupCollectivesTest : public CollectivesTest {
 protected:
  // Per-rank counts of the members: the suite's count, an empty one, a
  // small one, and one of about half.
  std::vector<int64_t> Counts() const { return {count_, 0, 3, count_ / 2 + 1}; }
  // Where member k's values start in InputValue's index space.
  static int64_t First(int k) { return 100003 * k; }
  // Member k works in place when k is odd.
  static bool InPlace(size_t k) { return k % 2 == 1; }
};

TEST_P(GroupCollectivesTest, AllGatherGroupEqualsEachMembersAllGather) {
  const std::vector<int64_t> counts = Counts();
  const size_t m = counts.size();
  // recv[r][k]: rank r's output of member k (N x count, one spare element
  // so an empty member's buffer is not null).
  std::vector<std::vector<std::vector<uint8_t>>> recv(n_);
  std::vector<int64_t> calls_before(n_);
  for (int r = 0; r < n_; ++r) calls_before[r] = comms_[r]->stats().of(CommOp::kAllGather).calls;
  ParallelFor(n_, [&](int r) {
    std::vector<std::vector<uint8_t>> send(m);
    std::vector<CollectiveArgs> group;
    recv[r].resize(m);
    for (size_t k = 0; k < m; ++k) {
      send[k] = Encode(Input(r, counts[k] + 1, First(k)), dtype_);
      recv[r][k].assign(Bytes(counts[k] * n_ + 1), 0xAB);
      const void* src = send[k].data();
      if (InPlace(k)) {
        std::memcpy(recv[r][k].data() + Bytes(counts[k] * r), send[k].data(), Bytes(counts[k]));
        src = recv[r][k].data() + Bytes(counts[k] * r);
      }
      group.push_back({src, recv[r][k].data(), counts[k]});
    }
    EXPECT_TRUE(comms_[r]->AllGatherGroup(group, dtype_)->Wait(absl::Seconds(30)).ok());
    // A single op after the group pairs with the peers' single op.
    std::vector<uint8_t> one = Encode(Input(r, 2), dtype_), all(Bytes(2 * n_));
    EXPECT_TRUE(
        comms_[r]->AllGather(one.data(), all.data(), 2, dtype_)->Wait(absl::Seconds(30)).ok());
    EXPECT_EQ(Decode(all, dtype_)[2 * (n_ - 1) + 1], InputValue(n_ - 1, 1)) << "rank " << r;
  });
  for (int r = 0; r < n_; ++r) {
    EXPECT_EQ(comms_[r]->stats().of(CommOp::kAllGather).calls, calls_before[r] + 2);
    for (size_t k = 0; k < m; ++k) {
      const std::vector<float> got = Decode(recv[r][k], dtype_);
      for (int src = 0; src < n_; ++src) {
        for (int64_t i = 0; i < counts[k]; ++i) {
          ASSERT_EQ(got[src * counts[k] + i], InputValue(src, First(k) + i))
              << "rank " << r << " member " << k << " block " << src << " i " << i;
        }
      }
    }
  }
}

TEST_P(GroupCollectivesTest, ReduceScatterGroupEqualsEachMembersReduceScatter) {
  const std::vector<int64_t> counts = Counts();
  const size_t m = counts.size();
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    // send[r][k]: rank r's N x count input of member k, reduced in place
    // (into its rank's block) for odd k; out[r][k] otherwise.
    std::vector<std::vector<std::vector<uint8_t>>> send(n_), out(n_);
    ParallelFor(n_, [&](int r) {
      std::vector<CollectiveArgs> group;
      send[r].resize(m);
      out[r].resize(m);
      for (size_t k = 0; k < m; ++k) {
        send[r][k] = Encode(Input(r, counts[k] * n_ + 1, First(k)), dtype_);
        out[r][k].assign(Bytes(counts[k] + 1), 0xAB);
        void* dst = InPlace(k) ? send[r][k].data() + Bytes(counts[k] * r) : out[r][k].data();
        group.push_back({send[r][k].data(), dst, counts[k]});
      }
      EXPECT_TRUE(comms_[r]->ReduceScatterGroup(group, dtype_, op)->Wait(absl::Seconds(30)).ok());
    });
    for (int r = 0; r < n_; ++r) {
      for (size_t k = 0; k < m; ++k) {
        const uint8_t* at =
            InPlace(k) ? send[r][k].data() + Bytes(counts[k] * r) : out[r][k].data();
        const std::vector<float> got =
            Decode(std::vector<uint8_t>(at, at + Bytes(counts[k])), dtype_);
        for (int64_t i = 0; i < counts[k]; ++i) {
          ASSERT_EQ(got[i], Reduce(op, First(k) + r * counts[k] + i))
              << "rank " << r << " member " << k << " i " << i << " op " << static_cast<int>(op);
        }
      }
    }
  }
}

TEST_P(GroupCollectivesTest, AnEmptyGroupIsInvalid) {
  if (count_ != 1 || dtype_ != DType::kFp32) GTEST_SKIP() << "one run per world size";
  EXPECT_TRUE(
      absl::IsInvalidArgument(comms_[0]->AllGatherGroup({}, dtype_)->Wait(absl::Seconds(1))));
  EXPECT_TRUE(absl::IsInvalidArgument(
      comms_[0]->ReduceScatterGroup({}, dtype_, ReduceOp::kSum)->Wait(absl::Seconds(1))));
}

INSTANTIATE_TEST_SUITE_P(BackendsWorldSizesCountsDtypes, GroupCollectivesTest, CollectiveParams(),
                         ParamName);

}  // namespace
}  // namespace zeroshard::testing
