// Gloo communicator behaviour beyond results: timeouts that must fire, Abort,
// stats, argument errors, bf16 rounding, the factory by name.
#include <cstring>
#include <functional>

#include "gtest/gtest.h"
#include "tests/comm/rank_threads.h"
#include "worker/comm/communicator_factory.h"
#include "worker/comm/control_collectives.h"

namespace zeroshard::testing {
namespace {

TEST(GlooBehaviourTest, RankThatNeverShowsUpGivesDeadlineExceeded) {
  InMemoryStore store;
  GlooOptions opts;
  opts.timeout = absl::Milliseconds(500);
  const absl::Time start = absl::Now();
  auto comm = CreateGlooCommunicator(store, "gen/", 0, 2, opts);  // rank 1 never comes.
  const absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), absl::StatusCode::kDeadlineExceeded) << comm.status();
  EXPECT_GE(took, absl::Milliseconds(400));
  EXPECT_LT(took, absl::Seconds(5));
}

TEST(GlooBehaviourTest, OpTimeoutFiresWhenPeerNeverJoins) {
  InMemoryStore store;
  auto comms = MustConnectGloo(store, 2);
  ASSERT_EQ(comms.size(), 2u);
  std::vector<float> in(16, 1.0f), out(32);
  CollectiveOptions opts;
  opts.timeout = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  auto work = comms[0]->AllGather(in.data(), out.data(), 16, DType::kFp32, opts);
  absl::Status s = work->Wait(absl::Seconds(10));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  // The communicator is unusable afterwards, with the same error.
  auto later = comms[0]->AllReduce(in.data(), in.data(), 16, DType::kFp32, ReduceOp::kSum);
  EXPECT_FALSE(later->Wait(absl::Seconds(10)).ok());
}

TEST(GlooBehaviourTest, WorkWaitTimesOutWithoutCancelling) {
  InMemoryStore store;
  auto comms = MustConnectGloo(store, 2);
  ASSERT_EQ(comms.size(), 2u);
  std::vector<float> a(8, 1.0f), b(8, 2.0f);
  auto w0 = comms[0]->AllReduce(a.data(), a.data(), 8, DType::kFp32, ReduceOp::kSum);
  EXPECT_EQ(w0->Wait(absl::Milliseconds(50)).code(), absl::StatusCode::kDeadlineExceeded);
  auto w1 = comms[1]->AllReduce(b.data(), b.data(), 8, DType::kFp32, ReduceOp::kSum);
  EXPECT_TRUE(w0->Wait(absl::Seconds(10)).ok());
  EXPECT_TRUE(w1->Wait(absl::Seconds(10)).ok());
  EXPECT_EQ(a, std::vector<float>(8, 3.0f));
}

TEST(GlooBehaviourTest, AbortFailsPendingAndLaterOpsFastAndPeersNotice) {
  InMemoryStore store;
  auto comms = MustConnectGloo(store, 2);
  ASSERT_EQ(comms.size(), 2u);
  std::vector<float> a(1000, 1.0f), b(1000, 1.0f), c(1000, 1.0f);
  // Rank 0 enters an all-reduce that rank 1 has not issued (yet).
  auto running = comms[0]->AllReduce(a.data(), a.data(), 1000, DType::kFp32, ReduceOp::kSum);
  auto queued = comms[0]->AllGather(c.data(), c.data(), 1, DType::kFp32);
  absl::SleepFor(absl::Milliseconds(100));
  const absl::Time start = absl::Now();
  comms[0]->Abort();
  EXPECT_EQ(running->Wait(absl::Seconds(5)).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(queued->Wait(absl::Seconds(5)).code(), absl::StatusCode::kAborted);
  auto after = comms[0]->AllGather(c.data(), c.data(), 1, DType::kFp32);
  EXPECT_EQ(after->Wait(absl::Seconds(1)).code(), absl::StatusCode::kAborted);
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  // Rank 1's connection to rank 0 is closed: its op fails (UNAVAILABLE), well
  // before the 60 s op timeout.
  auto peer = comms[1]->AllReduce(b.data(), b.data(), 1000, DType::kFp32, ReduceOp::kSum);
  absl::Status s1 = peer->Wait(absl::Seconds(10));
  EXPECT_EQ(s1.code(), absl::StatusCode::kUnavailable) << s1;
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  // Destroying both returns promptly: rank 0's running op was woken, not
  // left to its 60 s timeout.
  comms.clear();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

// A control collective whose peer never calls gives up at its timeout,
// aborts the communicator (later ops fail fast with ABORTED) and keeps its
// buffer alive for the still-running op ([Note: failed collective buffers]).
TEST(GlooBehaviourTest, ControlCollectiveTimeoutAbortsTheCommunicator) {
  InMemoryStore store;
  auto comms = MustConnectGloo(store, 2);
  ASSERT_EQ(comms.size(), 2u);
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<int64_t>> got =
      AllReduceControl(*comms[0], std::vector<int64_t>{7}, ReduceOp::kSum, absl::Milliseconds(300));
  const absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << got.status();
  EXPECT_GE(took, absl::Milliseconds(250));
  EXPECT_LT(took, absl::Seconds(5));
  double x = 1.0;
  EXPECT_EQ(
      comms[0]->AllReduce(&x, &x, 1, DType::kFp64, ReduceOp::kSum)->Wait(absl::Seconds(5)).code(),
      absl::StatusCode::kAborted);
}

// Both ranks call: the helpers return every rank's values in their own type.
TEST(GlooBehaviourTest, ControlCollectivesCarryInt64AndDouble) {
  InMemoryStore store;
  auto comms = MustConnectGloo(store, 2);
  ASSERT_EQ(comms.size(), 2u);
  std::vector<absl::StatusOr<std::vector<double>>> gathered(2);
  std::vector<absl::StatusOr<std::vector<int64_t>>> broadcast(2);
  ParallelFor(2, [&](int r) {
    gathered[r] =
        AllGatherControl(*comms[r], std::vector<double>{r + 0.1, r + 1e-12}, absl::Seconds(30));
    broadcast[r] =
        BroadcastControl(*comms[r], std::vector<int64_t>{r == 1 ? (int64_t{1} << 53) + 1 : -1}, 1,
                         absl::Seconds(30));
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(gathered[r].ok()) << gathered[r].status();
    EXPECT_EQ(*gathered[r], (std::vector<double>{0.1, 1e-12, 1.1, 1 + 1e-12}));
    ASSERT_TRUE(broadcast[r].ok()) << broadcast[r].status();
    EXPECT_EQ((*broadcast[r])[0], (int64_t{1} << 53) + 1);
  }
}

TEST(GlooBehaviourTest, StatsCountBytesCallsAndSeconds) {
  InMemoryStore store;
  const int n = 3;
  const int64_t count = 1000;
  auto comms = MustConnectGloo(store, n);
  ASSERT_EQ(comms.size(), static_cast<size_t>(n));
  ParallelFor(n, [&](int r) {
    std::vector<float> in(count * n, 1.0f), out(count * n);
    for (int k = 0; k < 2; ++k) {
      EXPECT_TRUE(comms[r]
                      ->AllGather(in.data(), out.data(), count, DType::kFp32)
                      ->Wait(absl::Seconds(10))
                      .ok());
    }
    EXPECT_TRUE(comms[r]
                    ->ReduceScatter(in.data(), out.data(), count, DType::kBf16, ReduceOp::kSum)
                    ->Wait(absl::Seconds(10))
                    .ok());
    EXPECT_TRUE(comms[r]
                    ->AllReduce(in.data(), out.data(), count, DType::kFp32, ReduceOp::kMax)
                    ->Wait(absl::Seconds(10))
                    .ok());
    EXPECT_TRUE(comms[r]
                    ->Broadcast(in.data(), out.data(), count, DType::kBf16, 0)
                    ->Wait(absl::Seconds(10))
                    .ok());
  });
  for (int r = 0; r < n; ++r) {
    CommStats s = comms[r]->stats();
    EXPECT_EQ(s.of(CommOp::kAllGather).calls, 2);
    EXPECT_EQ(s.of(CommOp::kAllGather).bytes, 2 * count * n * 4);
    EXPECT_GT(s.of(CommOp::kAllGather).seconds, 0.0);
    EXPECT_EQ(s.of(CommOp::kReduceScatter).bytes, count * n * 2);
    EXPECT_EQ(s.of(CommOp::kAllReduce).bytes, count * 4);
    EXPECT_EQ(s.of(CommOp::kBroadcast).bytes, count * 2);
    EXPECT_EQ(s.of(CommOp::kBarrier).calls, 0);
  }
}

TEST(GlooBehaviourTest, Bf16ReductionsRoundOnce) {
  // 1 + 2^-8 + 2^-8: rounding to bf16 after each addition gives 1 (each 2^-8
  // is half an ulp, ties to even); fp32 accumulation then one rounding gives
  // 1 + 2^-7 exactly.
  InMemoryStore store;
  auto comms = MustConnectGloo(store, 3);
  ASSERT_EQ(comms.size(), 3u);
  const float small = 1.0f / 256.0f;
  std::vector<bf16> ar(3), rs(3);
  ParallelFor(3, [&](int r) {
    const bf16 v = FloatToBf16(r == 0 ? 1.0f : small);
    std::vector<bf16> in3(3, v);
    EXPECT_TRUE(comms[r]
                    ->AllReduce(&v, &ar[r], 1, DType::kBf16, ReduceOp::kSum)
                    ->Wait(absl::Seconds(10))
                    .ok());
    EXPECT_TRUE(comms[r]
                    ->ReduceScatter(in3.data(), &rs[r], 1, DType::kBf16, ReduceOp::kSum)
                    ->Wait(absl::Seconds(10))
                    .ok());
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(Bf16ToFloat(ar[r]), 1.0f + 2 * small) << "rank " << r;
    EXPECT_EQ(Bf16ToFloat(rs[r]), 1.0f + 2 * small) << "rank " << r;
  }
}

TEST(GlooBehaviourTest, BadArgumentsAreInvalidArgument) {
  InMemoryStore store;
  EXPECT_EQ(CreateGlooCommunicator(store, "p/", 2, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateGlooCommunicator(store, "p/", 0, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto comm = CreateGlooCommunicator(store, "solo/", 0, 1);
  ASSERT_TRUE(comm.ok()) << comm.status();
  float x = 1.0f;
  EXPECT_EQ(
      (*comm)->AllReduce(&x, &x, 1, DType::kFp16, ReduceOp::kSum)->Wait(absl::Seconds(1)).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*comm)->AllGather(&x, &x, -1, DType::kFp32)->Wait(absl::Seconds(1)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*comm)->Broadcast(&x, &x, 1, DType::kFp32, 1)->Wait(absl::Seconds(1)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(GlooBehaviourTest, FactoryByBackendName) {
  InMemoryStore store;
  auto gloo = CreateCommunicator("gloo", store, "f/", 0, 1);
  ASSERT_TRUE(gloo.ok()) << gloo.status();
  EXPECT_EQ((*gloo)->world_size(), 1);
  EXPECT_EQ(CreateCommunicator("mpi", store, "f/", 0, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto nccl = CreateCommunicator("nccl", store, "n/", 0, 1);
  if (!nccl.ok()) {
    // No NCCL in this build, or no GPU here: a clear refusal, not a crash.
    EXPECT_EQ(nccl.status().code(), absl::StatusCode::kFailedPrecondition) << nccl.status();
    std::printf("nccl backend refused as expected: %s\n", nccl.status().ToString().c_str());
  }
}

TEST(GlooBehaviourTest, NewPrefixIsANewGeneration) {
  // The same store serves two generations of different sizes.
  InMemoryStore store;
  auto gen1 = ConnectGloo(store, "job/gen1/", 3);
  auto gen2 = ConnectGloo(store, "job/gen2/", 2);
  for (auto& c : gen1) ASSERT_TRUE(c.ok()) << c.status();
  for (auto& c : gen2) ASSERT_TRUE(c.ok()) << c.status();
  std::vector<float> v(2);
  ParallelFor(2, [&](int r) {
    float x = static_cast<float>(r + 1);
    EXPECT_TRUE((*gen2[r])
                    ->AllReduce(&x, &v[r], 1, DType::kFp32, ReduceOp::kSum)
                    ->Wait(absl::Seconds(10))
                    .ok());
  });
  EXPECT_EQ(v, std::vector<float>({3.0f, 3.0f}));
}

}  // namespace
}  // namespace zeroshard::testing
