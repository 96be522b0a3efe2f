// The Gloo backend's own rings (gloo_ring_*.h): messages over several
// segments, every placement of the send and receive buffers, and Abort
// waking an op that waits on a silent peer.
#include <cmath>
#include <cstring>
#include <functional>

#include "gtest/gtest.h"
#include "tests/comm/rank_threads.h"
#include "worker/comm/communicator.h"

namespace zeroshard::testing {
namespace {

// The ring moves 1 MiB segments (2^18 floats): 2 full ones and a 5-element
// tail, at N = 2 (the last step is the first: it sends from the input and
// lands in recv), 3 and 4, into a separate recv and in place, fp32 and bf16.
TEST(GlooRingTest, ReduceScatterOverSeveralSegments) {
  const int64_t count = (int64_t{1} << 19) + 5;
  for (int n : {2, 3, 4}) {
    InMemoryStore store;
    auto comms = MustConnectGloo(store, n);
    ASSERT_EQ(comms.size(), static_cast<size_t>(n));
    for (DType dtype : {DType::kFp32, DType::kBf16}) {
      for (bool in_place : {false, true}) {
        std::vector<std::vector<float>> got(n);
        ParallelFor(n, [&](int r) {
          std::vector<float> in(count * n);
          for (int64_t i = 0; i < count * n; ++i) in[i] = InputValue(r, i);
          std::vector<uint8_t> send = Encode(in, dtype), recv(count * DTypeSize(dtype));
          uint8_t* dst = in_place ? send.data() + r * count * DTypeSize(dtype) : recv.data();
          EXPECT_TRUE(comms[r]
                          ->ReduceScatter(send.data(), dst, count, dtype, ReduceOp::kSum)
                          ->Wait(absl::Seconds(30))
                          .ok());
          got[r] = Decode(std::vector<uint8_t>(dst, dst + count * DTypeSize(dtype)), dtype);
        });
        for (int r = 0; r < n; ++r) {
          for (int64_t i = 0; i < count; ++i) {
            const int64_t j = r * count + i;
            float want = 0;
            for (int q = 0; q < n; ++q) want += InputValue(q, j);
            ASSERT_EQ(got[r][i], want)
                << "N " << n << " rank " << r << " i " << i << " in place " << in_place;
          }
        }
      }
    }
  }
}

// The all-gather ring moves 1 MiB segments and forwards each as it lands:
// 2 full segments and a 6-byte tail per block (bf16, moved as bytes), N = 2,
// 3, 4. A rank's block comes in place, from a separate send buffer (sent
// from there while it is copied into place), or from the start of the
// output, overlapping block 0 (copied into place first). Every rank must
// hold every rank's bytes.
TEST(GlooRingTest, AllGatherOverSeveralSegments) {
  enum class Send { kInPlace, kSeparate, kAtBlockZero };
  const int64_t block = (int64_t{1} << 20) + 3;  // Elements.
  for (int n : {2, 3, 4}) {
    for (Send where : {Send::kInPlace, Send::kSeparate, Send::kAtBlockZero}) {
      InMemoryStore store;
      auto comms = MustConnectGloo(store, n);
      ASSERT_EQ(comms.size(), static_cast<size_t>(n));
      auto value = [](int r, int64_t i) {
        return static_cast<uint16_t>((r * 131 + i * 7) % 65521);
      };
      std::vector<std::vector<uint16_t>> out(n, std::vector<uint16_t>(block * n));
      ParallelFor(n, [&](int r) {
        std::vector<uint16_t> send(block);
        for (int64_t i = 0; i < block; ++i) send[i] = value(r, i);
        uint16_t* from = send.data();
        if (where != Send::kSeparate) {
          from = out[r].data() + (where == Send::kInPlace ? r * block : 0);
          std::memcpy(from, send.data(), block * sizeof(uint16_t));
        }
        EXPECT_TRUE(comms[r]
                        ->AllGather(from, out[r].data(), block, DType::kBf16)
                        ->Wait(absl::Seconds(30))
                        .ok());
        if (where == Send::kSeparate) {
          for (int64_t i = 0; i < block; ++i) ASSERT_EQ(send[i], value(r, i)) << "send changed";
        }
      });
      for (int r = 0; r < n; ++r) {
        for (int64_t j = 0; j < block * n; ++j) {
          ASSERT_EQ(out[r][j], value(static_cast<int>(j / block), j % block))
              << "N " << n << " rank " << r << " element " << j << " send "
              << static_cast<int>(where);
        }
      }
    }
  }
}

// The broadcast chain moves 1 MiB segments, each passed on as it lands:
// 2 full segments and a tail of 3 bf16 elements (6 bytes), from
// every root, at N = 2, 3 and 4, into the root's own buffer (in place) and
// from a separate one. Every rank must hold the root's bytes, and the
// root's send buffer must be unchanged.
TEST(GlooRingTest, BroadcastOverSeveralSegmentsFromEveryRoot) {
  const int64_t count = (int64_t{1} << 20) + 3;  // bf16 elements.
  auto value = [](int64_t i) { return static_cast<uint16_t>((i * 40503) % 65521); };
  for (int n : {2, 3, 4}) {
    InMemoryStore store;
    auto comms = MustConnectGloo(store, n);
    ASSERT_EQ(comms.size(), static_cast<size_t>(n));
    for (int root = 0; root < n; ++root) {
      for (bool in_place : {true, false}) {
        std::vector<std::vector<uint16_t>> out(n, std::vector<uint16_t>(count, 0xABCD));
        std::vector<uint16_t> send(count);
        for (int64_t i = 0; i < count; ++i) send[i] = value(i);
        if (in_place) out[root] = send;
        ParallelFor(n, [&](int r) {
          const void* from = r != root ? nullptr : in_place ? out[r].data() : send.data();
          EXPECT_TRUE(comms[r]
                          ->Broadcast(from, out[r].data(), count, DType::kBf16, root)
                          ->Wait(absl::Seconds(30))
                          .ok());
        });
        for (int64_t i = 0; i < count; ++i) ASSERT_EQ(send[i], value(i)) << "send changed";
        for (int r = 0; r < n; ++r) {
          ASSERT_EQ(out[r], send) << "N " << n << " root " << root << " rank " << r << " in place "
                                  << in_place;
        }
      }
    }
  }
}

// Control values (int64, fp64) are folded in rank order on every rank, so
// all ranks get the same bits even where fp64 addition's order matters:
// 2^53 + 1 + 1 - 2^53 is 2 in one order and 0 or 1 in others.
TEST(GlooRingTest, ControlValuesFoldInRankOrderOnEveryRank) {
  const std::vector<double> parts = {std::ldexp(1.0, 53), 1.0, 1.0, -std::ldexp(1.0, 53)};
  const int n = static_cast<int>(parts.size());
  InMemoryStore store;
  auto comms = MustConnectGloo(store, n);
  ASSERT_EQ(comms.size(), static_cast<size_t>(n));
  std::vector<std::vector<double>> sums(n);
  std::vector<std::vector<int64_t>> maxima(n);
  ParallelFor(n, [&](int r) {
    sums[r] = {parts[r], -parts[r]};
    maxima[r] = {int64_t{1} << 62 | r, -r};
    EXPECT_TRUE(comms[r]
                    ->AllReduce(sums[r].data(), sums[r].data(), 2, DType::kFp64, ReduceOp::kSum)
                    ->Wait(absl::Seconds(30))
                    .ok());
    EXPECT_TRUE(
        comms[r]
            ->AllReduce(maxima[r].data(), maxima[r].data(), 2, DType::kInt64, ReduceOp::kMax)
            ->Wait(absl::Seconds(30))
            .ok());
  });
  double forward = parts[0], backward = -parts[0];  // The reference: in rank order.
  for (int q = 1; q < n; ++q) {
    forward += parts[q];
    backward += -parts[q];
  }
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(sums[r], (std::vector<double>{forward, backward})) << "rank " << r;
    EXPECT_EQ(maxima[r], (std::vector<int64_t>{int64_t{1} << 62 | (n - 1), 0})) << "rank " << r;
  }
}

// Empty ops pass null buffers (communicator.h allows it for count 0) and
// complete OK without touching them, alone and at N = 3.
TEST(GlooRingTest, EmptyOpsTakeNullBuffers) {
  for (int n : {1, 3}) {
    InMemoryStore store;
    auto comms = MustConnectGloo(store, n);
    ASSERT_EQ(comms.size(), static_cast<size_t>(n));
    ParallelFor(n, [&](int r) {
      Communicator& c = *comms[r];
      for (DType dtype : {DType::kFp32, DType::kFp64, DType::kInt64}) {
        EXPECT_TRUE(
            c.AllReduce(nullptr, nullptr, 0, dtype, ReduceOp::kSum)->Wait(absl::Seconds(30)).ok());
      }
      EXPECT_TRUE(c.Broadcast(nullptr, nullptr, 0, DType::kFp32, 0)->Wait(absl::Seconds(30)).ok());
      EXPECT_TRUE(c.Barrier().ok());
    });
  }
}

// A rank whose collective waits on a peer that is alive but never sends (a
// stopped process): Abort returns the op at once and the communicator is
// destroyed promptly, not after the op's 60 s timeout. Every kind of op:
// every op runs on zeroshard's rings, which register their waits.
struct SilentPeerCase {
  const char* name;
  // Issues rank r's part of the op over `buf` (3 blocks of `block` fp32).
  std::function<std::unique_ptr<Work>(Communicator&, int r, float* buf, int64_t block)> issue;
};

class AbortWakesTest : public ::testing::TestWithParam<SilentPeerCase> {};

TEST_P(AbortWakesTest, AnOpWaitingOnASilentPeer) {
  InMemoryStore store;
  auto comms = MustConnectGloo(store, 3);
  ASSERT_EQ(comms.size(), 3u);
  const int64_t block = int64_t{3} << 18;  // 3 MiB of fp32.
  // Three blocks for the ops, a fourth apart for an out-of-place side.
  std::vector<float> a(block * 4, 1.0f), b(block * 4, 1.0f);
  auto w0 = GetParam().issue(*comms[0], 0, a.data(), block);
  auto w1 = GetParam().issue(*comms[1], 1, b.data(), block);
  absl::SleepFor(absl::Milliseconds(200));  // Rank 2 never issues its part.
  const absl::Time start = absl::Now();
  comms[0]->Abort();
  EXPECT_EQ(w0->Wait(absl::Seconds(5)).code(), absl::StatusCode::kAborted);
  comms[0].reset();  // Joins its op: returns at once, not at the op's timeout.
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  // Rank 1 may be waiting on the silent rank 2, not on rank 0: its own Abort.
  comms[1]->Abort();
  EXPECT_FALSE(w1->Wait(absl::Seconds(5)).ok());
  comms.clear();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

INSTANTIATE_TEST_SUITE_P(
    EveryOp, AbortWakesTest,
    ::testing::Values(
        SilentPeerCase{"AllGather",
                       [](Communicator& c, int r, float* buf, int64_t block) {
                         return c.AllGather(buf + r * block, buf, block, DType::kFp32);
                       }},
        SilentPeerCase{"AllGatherFromASeparateBuffer",
                       [](Communicator& c, int, float* buf, int64_t block) {
                         return c.AllGather(buf + 3 * block, buf, block, DType::kFp32);
                       }},
        SilentPeerCase{"ReduceScatter",
                       [](Communicator& c, int r, float* buf, int64_t block) {
                         return c.ReduceScatter(buf, buf + r * block, block, DType::kFp32,
                                                ReduceOp::kSum);
                       }},
        SilentPeerCase{"ReduceScatterIntoASeparateBuffer",
                       [](Communicator& c, int, float* buf, int64_t block) {
                         return c.ReduceScatter(buf, buf + 3 * block, block, DType::kFp32,
                                                ReduceOp::kSum);
                       }},
        SilentPeerCase{"AllReduceFp32",
                       [](Communicator& c, int, float* buf, int64_t block) {
                         return c.AllReduce(buf, buf, 3 * block, DType::kFp32, ReduceOp::kSum);
                       }},
        SilentPeerCase{"AllReduceFp64Control",
                       [](Communicator& c, int, float* buf, int64_t block) {
                         return c.AllReduce(buf, buf, block, DType::kFp64, ReduceOp::kSum);
                       }},
        SilentPeerCase{"BroadcastFromTheSilentRank",
                       [](Communicator& c, int, float* buf, int64_t block) {
                         return c.Broadcast(buf, buf, 3 * block, DType::kFp32, /*root=*/2);
                       }}),
    [](const ::testing::TestParamInfo<SilentPeerCase>& info) { return info.param.name; });

}  // namespace
}  // namespace zeroshard::testing
