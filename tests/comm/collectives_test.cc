// The CPU backends' collectives (Gloo over loopback TCP, shm through shared
// memory with small slots, so ops span many rounds) against references
// computed directly in the test, ranks as threads over an InMemoryStore,
// over backends x world sizes x element counts x dtypes (STYLE.md point 15).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/comm/collectives_fixture.h"

namespace zeroshard::testing {
namespace {

TEST_P(CollectivesTest, AllGather) {
  for (bool in_place : {false, true}) {
    std::vector<std::vector<uint8_t>> recv(n_, std::vector<uint8_t>(Bytes(count_ * n_), 0xAB));
    ParallelFor(n_, [&](int r) {
      std::vector<uint8_t> send = Encode(Input(r, count_), dtype_);
      const void* src = send.data();
      if (in_place) {
        std::memcpy(recv[r].data() + Bytes(count_ * r), send.data(), send.size());
        src = recv[r].data() + Bytes(count_ * r);
      }
      auto work = comms_[r]->AllGather(src, recv[r].data(), count_, dtype_);
      EXPECT_TRUE(work->Wait(absl::Seconds(30)).ok()) << "rank " << r;
    });
    for (int r = 0; r < n_; ++r) {
      std::vector<float> got = Decode(recv[r], dtype_);
      for (int src = 0; src < n_; ++src) {
        for (int64_t i = 0; i < count_; ++i) {
          ASSERT_EQ(got[src * count_ + i], InputValue(src, i))
              << "rank " << r << " block " << src << " i " << i << " in_place " << in_place;
        }
      }
    }
  }
}

TEST_P(CollectivesTest, ReduceScatter) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    for (bool in_place : {false, true}) {
      std::vector<std::vector<uint8_t>> send(n_);
      std::vector<std::vector<uint8_t>> recv(n_, std::vector<uint8_t>(Bytes(count_), 0xAB));
      ParallelFor(n_, [&](int r) {
        send[r] = Encode(Input(r, count_ * n_), dtype_);
        void* dst = in_place ? send[r].data() + Bytes(count_ * r) : recv[r].data();
        auto work = comms_[r]->ReduceScatter(send[r].data(), dst, count_, dtype_, op);
        EXPECT_TRUE(work->Wait(absl::Seconds(30)).ok()) << "rank " << r;
      });
      for (int r = 0; r < n_; ++r) {
        std::vector<float> got =
            in_place ? Decode(std::vector<uint8_t>(send[r].begin() + Bytes(count_ * r),
                                                   send[r].begin() + Bytes(count_ * (r + 1))),
                              dtype_)
                     : Decode(recv[r], dtype_);
        for (int64_t i = 0; i < count_; ++i) {
          ASSERT_EQ(got[i], Reduce(op, r * count_ + i))
              << "rank " << r << " i " << i << " op " << static_cast<int>(op) << " in_place "
              << in_place;
        }
      }
    }
  }
}

TEST_P(CollectivesTest, AllReduce) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    for (bool in_place : {false, true}) {
      std::vector<std::vector<uint8_t>> send(n_);
      std::vector<std::vector<uint8_t>> recv(n_, std::vector<uint8_t>(Bytes(count_), 0xAB));
      ParallelFor(n_, [&](int r) {
        send[r] = Encode(Input(r, count_), dtype_);
        void* dst = in_place ? send[r].data() : recv[r].data();
        auto work = comms_[r]->AllReduce(send[r].data(), dst, count_, dtype_, op);
        EXPECT_TRUE(work->Wait(absl::Seconds(30)).ok()) << "rank " << r;
      });
      for (int r = 0; r < n_; ++r) {
        std::vector<float> got = Decode(in_place ? send[r] : recv[r], dtype_);
        for (int64_t i = 0; i < count_; ++i) {
          ASSERT_EQ(got[i], Reduce(op, i)) << "rank " << r << " i " << i;
        }
      }
    }
  }
}

TEST_P(CollectivesTest, BroadcastFromEveryRoot) {
  for (int root = 0; root < n_; ++root) {
    std::vector<std::vector<uint8_t>> recv(n_, std::vector<uint8_t>(Bytes(count_), 0xAB));
    ParallelFor(n_, [&](int r) {
      std::vector<uint8_t> send = Encode(Input(r, count_), dtype_);
      // The root broadcasts in place on odd roots, out of place on even ones.
      if (r == root && root % 2 == 1) recv[r] = send;
      const void* src = (r == root && root % 2 == 1) ? recv[r].data() : send.data();
      auto work = comms_[r]->Broadcast(src, recv[r].data(), count_, dtype_, root);
      EXPECT_TRUE(work->Wait(absl::Seconds(30)).ok()) << "rank " << r;
    });
    for (int r = 0; r < n_; ++r) {
      ASSERT_EQ(Decode(recv[r], dtype_), Input(root, count_)) << "rank " << r << " root " << root;
    }
  }
}

// Each rank receives its right neighbour's buffer, twice in a row (the
// second shift must not pair with the first).
TEST_P(CollectivesTest, RingShiftReceivesTheRightNeighbours) {
  for (int round = 0; round < 2; ++round) {
    std::vector<std::vector<uint8_t>> recv(n_, std::vector<uint8_t>(Bytes(count_), 0xAB));
    ParallelFor(n_, [&](int r) {
      std::vector<uint8_t> send = Encode(Input(r + round * n_, count_), dtype_);
      auto work = comms_[r]->RingShift(send.data(), recv[r].data(), count_, dtype_);
      EXPECT_TRUE(work->Wait(absl::Seconds(30)).ok()) << "rank " << r;
    });
    for (int r = 0; r < n_; ++r) {
      ASSERT_EQ(Decode(recv[r], dtype_), Input((r + 1) % n_ + round * n_, count_))
          << "rank " << r << " round " << round;
    }
  }
}

TEST_P(CollectivesTest, BarrierAndOrderedQueue) {
  // Several ops issued back to back without waiting complete in order.
  std::vector<std::vector<uint8_t>> a(n_), b(n_);
  std::vector<int64_t> barriers_before(n_);
  for (int r = 0; r < n_; ++r) barriers_before[r] = comms_[r]->stats().of(CommOp::kBarrier).calls;
  ParallelFor(n_, [&](int r) {
    std::vector<uint8_t> in = Encode(Input(r, count_), dtype_);
    a[r].resize(Bytes(count_ * n_));
    b[r].resize(Bytes(count_));
    auto w1 = comms_[r]->AllGather(in.data(), a[r].data(), count_, dtype_);
    auto w2 = comms_[r]->AllReduce(in.data(), b[r].data(), count_, dtype_, ReduceOp::kSum);
    EXPECT_TRUE(comms_[r]->Barrier().ok());
    EXPECT_TRUE(w2->Wait(absl::Seconds(30)).ok());
    EXPECT_TRUE(w1->Wait(absl::Seconds(30)).ok());
  });
  for (int r = 0; r < n_; ++r) {
    std::vector<float> sum = Decode(b[r], dtype_);
    for (int64_t i = 0; i < count_; ++i) ASSERT_EQ(sum[i], Reduce(ReduceOp::kSum, i));
    EXPECT_EQ(comms_[r]->stats().of(CommOp::kBarrier).calls, barriers_before[r] + 1);
  }
}

// Control values (a step number, a loss sum, a squared norm) all-reduce in
// their own type: int64 values past 2^24 and doubles with more than fp32's
// 24 bits of mantissa come back exact, as the reference sums them.
TEST_P(CollectivesTest, AllReduceControlDTypes) {
  if (dtype_ != DType::kFp32 || count_ != 7) GTEST_SKIP() << "one run per world size";
  std::vector<std::vector<int64_t>> ints(n_, std::vector<int64_t>(count_));
  std::vector<std::vector<double>> doubles(n_, std::vector<double>(count_));
  ParallelFor(n_, [&](int r) {
    for (int64_t i = 0; i < count_; ++i) {
      ints[r][i] = (int64_t{1} << 40) + r * 1000003 + i;
      doubles[r][i] = 1.0 + (r + 1) * std::ldexp(1.0, -40) + static_cast<double>(i);
    }
    EXPECT_TRUE(
        comms_[r]
            ->AllReduce(ints[r].data(), ints[r].data(), count_, DType::kInt64, ReduceOp::kSum)
            ->Wait(absl::Seconds(30))
            .ok());
    EXPECT_TRUE(
        comms_[r]
            ->AllReduce(doubles[r].data(), doubles[r].data(), count_, DType::kFp64, ReduceOp::kMax)
            ->Wait(absl::Seconds(30))
            .ok());
  });
  for (int r = 0; r < n_; ++r) {
    for (int64_t i = 0; i < count_; ++i) {
      int64_t sum = 0;
      for (int q = 0; q < n_; ++q) sum += (int64_t{1} << 40) + q * 1000003 + i;
      ASSERT_EQ(ints[r][i], sum) << "rank " << r << " i " << i;
      ASSERT_EQ(doubles[r][i], 1.0 + n_ * std::ldexp(1.0, -40) + static_cast<double>(i));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BackendsWorldSizesCountsDtypes, CollectivesTest, CollectiveParams(),
                         ParamName);

}  // namespace
}  // namespace zeroshard::testing
