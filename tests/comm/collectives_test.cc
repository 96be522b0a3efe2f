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
#include "tests/comm/rank_threads.h"
#include "worker/comm/shm_collectives.h"

namespace zeroshard::testing {
namespace {

// backend, world size, count, dtype
using Param = std::tuple<std::string, int, int64_t, DType>;
using Pooled = std::map<std::pair<std::string, int>, std::vector<std::unique_ptr<Communicator>>>;

class CollectivesTest : public ::testing::TestWithParam<Param> {
 protected:
  // Connecting 8 Gloo ranks takes ~0.4 s, so each backend and world size
  // connects once and every test of that size reuses its communicators
  // (they stay usable).
  static void TearDownTestSuite() { Pool().clear(); }
  static Pooled& Pool() {
    static auto* pool = new Pooled();
    return *pool;
  }
  static InMemoryStore& Store() {
    static auto* store = new InMemoryStore();
    return *store;
  }

  void SetUp() override {
    std::string backend;
    std::tie(backend, n_, count_, dtype_) = GetParam();
    auto& comms = Pool()[{backend, n_}];
    if (comms.empty()) {
      static int connects = 0;  // A fresh prefix each time (--gtest_repeat).
      const std::string prefix = absl::StrCat(backend, n_, "/", connects++, "/");
      ShmOptions shm;
      shm.slot_bytes = 4096;
      for (auto& c : backend == "gloo" ? ConnectGloo(Store(), prefix, n_)
                                       : ConnectShm(Store(), prefix, n_, shm)) {
        ASSERT_TRUE(c.ok()) << c.status();
        comms.push_back(std::move(*c));
      }
    }
    for (auto& c : comms) comms_.push_back(c.get());
  }
  // rank r's input of `elements` values, starting at value index `first`.
  std::vector<float> Input(int r, int64_t elements, int64_t first = 0) const {
    return InputValues(r, elements, first);
  }
  float Reduce(ReduceOp op, int64_t i) const { return ReducedValue(op, n_, i); }
  size_t Bytes(int64_t elements) const { return elements * DTypeSize(dtype_); }

  int n_ = 0;
  int64_t count_ = 0;
  DType dtype_ = DType::kFp32;
  std::vector<Communicator*> comms_;
};

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
    EXPECT_TRUE(comms_[r]
                    ->AllReduce(ints[r].data(), ints[r].data(), count_, DType::kInt64,
                                ReduceOp::kSum)
                    ->Wait(absl::Seconds(30))
                    .ok());
    EXPECT_TRUE(comms_[r]
                    ->AllReduce(doubles[r].data(), doubles[r].data(), count_, DType::kFp64,
                                ReduceOp::kMax)
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

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  return absl::StrCat(std::get<0>(info.param), "_n", std::get<1>(info.param), "_count",
                      std::get<2>(info.param), "_",
                      std::get<3>(info.param) == DType::kFp32 ? "fp32" : "bf16");
}

// 20011 elements pass the shm all-reduce's one-round limit
// (kShmOneRoundElements): its two-round path.
static_assert(20011 > kShmOneRoundElements);
INSTANTIATE_TEST_SUITE_P(BackendsWorldSizesCountsDtypes, CollectivesTest,
                         ::testing::Combine(::testing::Values("gloo", "shm"),
                                            ::testing::Values(1, 2, 3, 5, 8),
                                            ::testing::Values<int64_t>(1, 7, 1000, 10007, 20011),
                                            ::testing::Values(DType::kFp32, DType::kBf16)),
                         ParamName);

}  // namespace
}  // namespace zeroshard::testing
