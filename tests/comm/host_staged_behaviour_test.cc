// Host-staged behaviour beyond the result sweep: control dtypes, queued ops
// and stats, a timeout that must fire, Abort, bad arguments, the factory.
// CpuDevice memory is host memory, so plain vectors are device buffers here.
#include <cmath>

#include "gtest/gtest.h"
#include "tests/comm/host_staged_util.h"
#include "worker/comm/communicator_factory.h"
#include "worker/comm/host_staged_communicator.h"
#include "worker/device/cpu_device.h"

namespace zeroshard::testing {
namespace {

class HostStagedBehaviourTest : public ::testing::Test {
 protected:
  // n staged ranks, each over its own CpuDevice.
  std::vector<Communicator*> Connect(int n) {
    world_ =
        ConnectStaged(store_, "gen/", n, [] { return std::unique_ptr<Device>(new CpuDevice(1)); });
    std::vector<Communicator*> out;
    for (auto& c : world_.comms) out.push_back(c.get());
    return out;
  }

  InMemoryStore store_;
  StagedWorld world_;
};

// int64 past 2^24 and doubles past fp32's mantissa come back exact.
TEST_F(HostStagedBehaviourTest, ControlDTypesAllReduceInTheirOwnType) {
  const int n = 3;
  const int64_t count = 7;
  auto comms = Connect(n);
  ASSERT_EQ(comms.size(), 3u);
  std::vector<std::vector<int64_t>> ints(n, std::vector<int64_t>(count));
  std::vector<std::vector<double>> doubles(n, std::vector<double>(count));
  ParallelFor(n, [&](int r) {
    for (int64_t i = 0; i < count; ++i) {
      ints[r][i] = (int64_t{1} << 40) + r * 1000003 + i;
      doubles[r][i] = 1.0 + (r + 1) * std::ldexp(1.0, -40) + static_cast<double>(i);
    }
    std::vector<double> max(count);
    auto w1 =
        comms[r]->AllReduce(ints[r].data(), ints[r].data(), count, DType::kInt64, ReduceOp::kSum);
    auto w2 =
        comms[r]->AllReduce(doubles[r].data(), max.data(), count, DType::kFp64, ReduceOp::kMax);
    EXPECT_TRUE(w1->Wait(absl::Seconds(30)).ok());
    EXPECT_TRUE(w2->Wait(absl::Seconds(30)).ok());
    doubles[r] = max;
  });
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < count; ++i) {
      EXPECT_EQ(ints[r][i], 3 * (int64_t{1} << 40) + 3 * 1000003 + 3 * i);
      EXPECT_EQ(doubles[r][i], 1.0 + n * std::ldexp(1.0, -40) + static_cast<double>(i));
    }
  }
}

// Ops of different sizes issued back to back (the staging buffer grows and is
// reused) complete in order; stats count them in nccl-tests' sizes.
TEST_F(HostStagedBehaviourTest, QueuedOpsCompleteInOrderWithStats) {
  const int n = 2;
  auto comms = Connect(n);
  ASSERT_EQ(comms.size(), 2u);
  std::vector<std::vector<float>> gathered(n, std::vector<float>(2 * 10007));
  std::vector<std::vector<float>> reduced(n, std::vector<float>(7));
  ParallelFor(n, [&](int r) {
    const std::vector<float> small = InputValues(r, 7), big = InputValues(r, 10007);
    auto w1 = comms[r]->AllReduce(small.data(), reduced[r].data(), 7, DType::kFp32, ReduceOp::kSum);
    auto w2 = comms[r]->AllGather(big.data(), gathered[r].data(), 10007, DType::kFp32);
    EXPECT_TRUE(comms[r]->Barrier().ok());
    EXPECT_TRUE(w2->Wait(absl::Seconds(30)).ok());
    EXPECT_TRUE(w1->Wait(absl::Seconds(30)).ok());
  });
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < 7; ++i) EXPECT_EQ(reduced[r][i], ReducedValue(ReduceOp::kSum, n, i));
    for (int64_t i = 0; i < 10007; ++i) {
      ASSERT_EQ(gathered[r][i], InputValue(0, i));
      ASSERT_EQ(gathered[r][10007 + i], InputValue(1, i));
    }
    const CommStats stats = comms[r]->stats();
    EXPECT_EQ(stats.of(CommOp::kAllReduce).calls, 1);
    EXPECT_EQ(stats.of(CommOp::kAllReduce).bytes, 7 * 4);
    EXPECT_EQ(stats.of(CommOp::kAllGather).bytes, 2 * 10007 * 4);
    EXPECT_EQ(stats.of(CommOp::kBarrier).calls, 1);
    EXPECT_GT(stats.of(CommOp::kAllGather).seconds, 0.0);
  }
}

TEST_F(HostStagedBehaviourTest, TimeoutFiresThenLaterOpsAreAborted) {
  std::vector<float> in(16, 1.0f), out(32);  // Outlive comms (op_queue.h).
  auto comms = Connect(2);
  ASSERT_EQ(comms.size(), 2u);
  CollectiveOptions opts;
  opts.timeout = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  // Rank 1 never calls.
  auto work = comms[0]->AllGather(in.data(), out.data(), 16, DType::kFp32, opts);
  const absl::Status s = work->Wait(absl::Seconds(10));
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_GE(took, absl::Milliseconds(250));
  EXPECT_LT(took, absl::Seconds(5));
  auto later = comms[0]->AllReduce(in.data(), in.data(), 16, DType::kFp32, ReduceOp::kSum);
  EXPECT_EQ(later->Wait(absl::Seconds(1)).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(comms[0]->Barrier().code(), absl::StatusCode::kAborted);
}

TEST_F(HostStagedBehaviourTest, AbortFailsRunningQueuedAndLaterOpsFast) {
  std::vector<float> a(1000, 1.0f), c(2, 1.0f);  // Outlive comms (op_queue.h).
  auto comms = Connect(2);
  ASSERT_EQ(comms.size(), 2u);
  // Rank 0 enters an all-reduce that rank 1 never issues.
  auto running = comms[0]->AllReduce(a.data(), a.data(), 1000, DType::kFp32, ReduceOp::kSum);
  auto queued = comms[0]->AllGather(c.data(), c.data(), 1, DType::kFp32);
  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time start = absl::Now();
  comms[0]->Abort();
  EXPECT_EQ(running->Wait(absl::Seconds(5)).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(queued->Wait(absl::Seconds(5)).code(), absl::StatusCode::kAborted);
  auto after = comms[0]->Broadcast(c.data(), c.data(), 1, DType::kFp32, 0);
  EXPECT_EQ(after->Wait(absl::Seconds(1)).code(), absl::StatusCode::kAborted);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

TEST_F(HostStagedBehaviourTest, BadArgumentsFailWithoutBreakingTheCommunicator) {
  auto comms = Connect(1);
  ASSERT_EQ(comms.size(), 1u);
  std::vector<int64_t> ints(4, 1);
  std::vector<float> x(4, 2.0f);
  auto code = [](std::unique_ptr<Work> w) { return w->Wait(absl::Seconds(1)).code(); };
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(
      code(comms[0]->ReduceScatter(ints.data(), ints.data(), 4, DType::kInt64, ReduceOp::kSum)),
      kInvalid);
  EXPECT_EQ(code(comms[0]->Broadcast(x.data(), x.data(), 4, DType::kFp32, 1)), kInvalid);
  EXPECT_EQ(code(comms[0]->AllGather(x.data(), x.data(), -1, DType::kFp32)), kInvalid);
  EXPECT_EQ(code(comms[0]->AllReduce(nullptr, x.data(), 4, DType::kFp32, ReduceOp::kSum)),
            kInvalid);
  EXPECT_TRUE(comms[0]
                  ->AllReduce(x.data(), x.data(), 4, DType::kFp32, ReduceOp::kSum)
                  ->Wait(absl::Seconds(5))
                  .ok());
  EXPECT_EQ(x, std::vector<float>(4, 2.0f));
}

TEST(HostStagedFactoryTest, ByNameNeedsADevice) {
  InMemoryStore store;
  auto none = CreateCommunicator("host-staged", store, "a/", 0, 1);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument) << none.status();
  CpuDevice device(1);
  CommunicatorOptions options;
  options.device = &device;
  auto comm = CreateCommunicator("host-staged", store, "b/", 0, 1, options);
  ASSERT_TRUE(comm.ok()) << comm.status();
  std::vector<float> x(3, 1.5f), y(3);
  EXPECT_TRUE((*comm)
                  ->AllReduce(x.data(), y.data(), 3, DType::kFp32, ReduceOp::kMax)
                  ->Wait(absl::Seconds(5))
                  .ok());
  EXPECT_EQ(y, x);
  EXPECT_EQ(CreateHostStagedCommunicator(nullptr, &device).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zeroshard::testing
