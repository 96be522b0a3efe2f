// NCCL backend on real GPUs: 1 process, one thread (rank) per visible device,
// plus N = 1. Same reference checks as the Gloo test. Exits 77 (CTest: skipped)
// with the reason printed when there is no usable GPU.
#include <cstdio>
#include <cstring>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/comm/rank_threads.h"
#include "worker/comm/nccl_communicator.h"
#include "worker/comm/nccl_device_memory.h"

namespace zeroshard::testing {
namespace {

int g_devices = 0;

// A device buffer holding `bytes`, freed on destruction.
class DeviceBytes {
 public:
  DeviceBytes(int device, size_t bytes) : device_(device), bytes_(bytes) {
    auto p = DeviceAlloc(device, std::max<size_t>(bytes, 1));
    CheckAllocated(p);
    ptr_ = *p;
  }
  ~DeviceBytes() { (void)DeviceFree(device_, ptr_); }
  void Upload(const std::vector<uint8_t>& host) {
    ASSERT_TRUE(CopyToDevice(device_, ptr_, host.data(), host.size()).ok());
  }
  std::vector<uint8_t> Download(size_t offset, size_t bytes) const {
    std::vector<uint8_t> host(bytes);
    EXPECT_TRUE(CopyToHost(device_, host.data(), static_cast<char*>(ptr_) + offset, bytes).ok());
    return host;
  }
  char* at(size_t offset) { return static_cast<char*>(ptr_) + offset; }

 private:
  static void CheckAllocated(const absl::StatusOr<void*>& p) {
    if (!p.ok()) {
      std::fprintf(stderr, "DeviceAlloc: %s\n", p.status().ToString().c_str());
      std::abort();
    }
  }
  int device_;
  size_t bytes_;
  void* ptr_ = nullptr;
};

using Param = std::tuple<int, int64_t, DType>;  // world (0 = all devices), count, dtype

class NcclCollectivesTest : public ::testing::TestWithParam<Param> {
 protected:
  // Ranks are destroyed together: ncclCommFinalize may wait for its peers.
  static void TearDownTestSuite() {
    for (auto& [n, comms] : Pool()) ParallelFor(n, [&](int r) { comms[r].reset(); });
    Pool().clear();
  }
  static std::map<int, std::vector<std::unique_ptr<Communicator>>>& Pool() {
    static auto* pool = new std::map<int, std::vector<std::unique_ptr<Communicator>>>();
    return *pool;
  }
  void SetUp() override {
    int world;
    std::tie(world, count_, dtype_) = GetParam();
    n_ = world == 0 ? g_devices : world;
    auto& comms = Pool()[n_];
    if (comms.empty()) {
      static InMemoryStore store;
      std::vector<absl::StatusOr<std::unique_ptr<Communicator>>> made(n_);
      ParallelFor(n_, [&](int r) {
        made[r] = CreateNcclCommunicator(store, absl::StrCat("nccl", n_, "/"), r, n_);
      });
      for (auto& c : made) {
        ASSERT_TRUE(c.ok()) << c.status();
        comms.push_back(std::move(*c));
      }
    }
    for (auto& c : comms) comms_.push_back(c.get());
  }
  size_t Bytes(int64_t e) const { return e * DTypeSize(dtype_); }
  std::vector<float> Input(int r, int64_t elements) const { return InputValues(r, elements); }
  float Reduce(ReduceOp op, int64_t i) const { return ReducedValue(op, n_, i); }

  int n_ = 0;
  int64_t count_ = 0;
  DType dtype_ = DType::kFp32;
  std::vector<Communicator*> comms_;
};

TEST_P(NcclCollectivesTest, AllGatherOutOfPlaceAndInPlace) {
  for (bool in_place : {false, true}) {
    std::vector<std::vector<uint8_t>> got(n_);
    ParallelFor(n_, [&](int r) {
      DeviceBytes send(r, Bytes(count_)), recv(r, Bytes(count_ * n_));
      std::vector<uint8_t> in = Encode(Input(r, count_), dtype_);
      send.Upload(in);
      const void* src = send.at(0);
      if (in_place) {
        ASSERT_TRUE(CopyToDevice(r, recv.at(Bytes(count_ * r)), in.data(), in.size()).ok());
        src = recv.at(Bytes(count_ * r));
      }
      EXPECT_TRUE(
          comms_[r]->AllGather(src, recv.at(0), count_, dtype_)->Wait(absl::Seconds(30)).ok());
      got[r] = recv.Download(0, Bytes(count_ * n_));
    });
    for (int r = 0; r < n_; ++r) {
      std::vector<float> v = Decode(got[r], dtype_);
      for (int src = 0; src < n_; ++src) {
        for (int64_t i = 0; i < count_; ++i) ASSERT_EQ(v[src * count_ + i], InputValue(src, i));
      }
    }
  }
}

TEST_P(NcclCollectivesTest, ReduceScatterAndAllReduce) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    for (bool in_place : {false, true}) {
      std::vector<std::vector<uint8_t>> rs(n_), ar(n_);
      ParallelFor(n_, [&](int r) {
        DeviceBytes send(r, Bytes(count_ * n_)), recv(r, Bytes(count_));
        send.Upload(Encode(Input(r, count_ * n_), dtype_));
        void* dst = in_place ? send.at(Bytes(count_ * r)) : recv.at(0);
        EXPECT_TRUE(comms_[r]
                        ->ReduceScatter(send.at(0), dst, count_, dtype_, op)
                        ->Wait(absl::Seconds(30))
                        .ok());
        rs[r] = in_place ? send.Download(Bytes(count_ * r), Bytes(count_))
                         : recv.Download(0, Bytes(count_));
        send.Upload(Encode(Input(r, count_), dtype_));
        void* ar_dst = in_place ? send.at(0) : recv.at(0);
        EXPECT_TRUE(comms_[r]
                        ->AllReduce(send.at(0), ar_dst, count_, dtype_, op)
                        ->Wait(absl::Seconds(30))
                        .ok());
        ar[r] = in_place ? send.Download(0, Bytes(count_)) : recv.Download(0, Bytes(count_));
      });
      for (int r = 0; r < n_; ++r) {
        std::vector<float> a = Decode(rs[r], dtype_), b = Decode(ar[r], dtype_);
        for (int64_t i = 0; i < count_; ++i) {
          ASSERT_EQ(a[i], Reduce(op, r * count_ + i)) << "reduce-scatter rank " << r;
          ASSERT_EQ(b[i], Reduce(op, i)) << "all-reduce rank " << r;
        }
      }
    }
  }
}

TEST_P(NcclCollectivesTest, BroadcastBarrierAndStats) {
  const int root = n_ - 1;
  std::vector<std::vector<uint8_t>> got(n_);
  ParallelFor(n_, [&](int r) {
    DeviceBytes buf(r, Bytes(count_));
    buf.Upload(Encode(Input(r, count_), dtype_));
    const CommStats before = comms_[r]->stats();
    EXPECT_TRUE(comms_[r]
                    ->Broadcast(buf.at(0), buf.at(0), count_, dtype_, root)
                    ->Wait(absl::Seconds(30))
                    .ok());
    EXPECT_TRUE(comms_[r]->Barrier().ok());
    const CommStats after = comms_[r]->stats();
    EXPECT_EQ(after.of(CommOp::kBroadcast).bytes - before.of(CommOp::kBroadcast).bytes,
              static_cast<int64_t>(Bytes(count_)));
    EXPECT_EQ(after.of(CommOp::kBarrier).calls - before.of(CommOp::kBarrier).calls, 1);
    got[r] = buf.Download(0, Bytes(count_));
  });
  for (int r = 0; r < n_; ++r) ASSERT_EQ(Decode(got[r], dtype_), Input(root, count_));
}

// A group of three all-gathers is one NCCL group: one Work, counted as one
// call of the summed bytes. A reduce-scatter issued while it is in flight
// runs on the other lane (its own communicator) and both complete.
TEST_P(NcclCollectivesTest, GroupedAllGatherBesideAReduceScatter) {
  const int64_t counts[3] = {count_, 1, count_ + 3};
  std::vector<std::vector<std::vector<uint8_t>>> got(n_);
  std::vector<std::vector<uint8_t>> rs(n_);
  ParallelFor(n_, [&](int r) {
    std::vector<std::unique_ptr<DeviceBytes>> sends, recvs;
    std::vector<CollectiveArgs> group;
    for (int64_t c : counts) {
      sends.push_back(std::make_unique<DeviceBytes>(r, Bytes(c)));
      recvs.push_back(std::make_unique<DeviceBytes>(r, Bytes(c * n_)));
      sends.back()->Upload(Encode(Input(r, c), dtype_));
      group.push_back({sends.back()->at(0), recvs.back()->at(0), c});
    }
    DeviceBytes rs_send(r, Bytes(count_ * n_)), rs_recv(r, Bytes(count_));
    rs_send.Upload(Encode(Input(r, count_ * n_), dtype_));
    const CommStats before = comms_[r]->stats();
    std::unique_ptr<Work> gather = comms_[r]->AllGatherGroup(group, dtype_);
    std::unique_ptr<Work> scatter =
        comms_[r]->ReduceScatter(rs_send.at(0), rs_recv.at(0), count_, dtype_, ReduceOp::kSum);
    EXPECT_TRUE(scatter->Wait(absl::Seconds(30)).ok());
    EXPECT_TRUE(gather->Wait(absl::Seconds(30)).ok());
    const CommStats after = comms_[r]->stats();
    EXPECT_EQ(after.of(CommOp::kAllGather).calls - before.of(CommOp::kAllGather).calls, 1);
    EXPECT_EQ(after.of(CommOp::kAllGather).bytes - before.of(CommOp::kAllGather).bytes,
              static_cast<int64_t>(Bytes((2 * count_ + 4) * n_)));
    for (size_t m = 0; m < 3; ++m) got[r].push_back(recvs[m]->Download(0, Bytes(counts[m] * n_)));
    rs[r] = rs_recv.Download(0, Bytes(count_));
  });
  for (int r = 0; r < n_; ++r) {
    for (size_t m = 0; m < 3; ++m) {
      const std::vector<float> v = Decode(got[r][m], dtype_);
      for (int src = 0; src < n_; ++src) {
        for (int64_t i = 0; i < counts[m]; ++i) {
          ASSERT_EQ(v[src * counts[m] + i], InputValue(src, i)) << "member " << m;
        }
      }
    }
    const std::vector<float> a = Decode(rs[r], dtype_);
    for (int64_t i = 0; i < count_; ++i) ASSERT_EQ(a[i], Reduce(ReduceOp::kSum, r * count_ + i));
  }
}

TEST(NcclBehaviourTest, HostPointerIsInvalidArgument) {
  InMemoryStore store;
  auto comm = CreateNcclCommunicator(store, "host/", 0, 1);
  ASSERT_TRUE(comm.ok()) << comm.status();
  std::vector<float> host(4);
  EXPECT_EQ((*comm)
                ->AllReduce(host.data(), host.data(), 4, DType::kFp32, ReduceOp::kSum)
                ->Wait(absl::Seconds(5))
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(NcclBehaviourTest, MissingRankTimesOutAndAbortFailsLaterOps) {
  InMemoryStore store;
  NcclOptions opts;
  opts.timeout = absl::Seconds(2);
  const absl::Time start = absl::Now();
  auto lonely = CreateNcclCommunicator(store, "missing/", 1, 2, opts);  // rank 0 never comes.
  EXPECT_EQ(lonely.status().code(), absl::StatusCode::kDeadlineExceeded) << lonely.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));

  auto comm = CreateNcclCommunicator(store, "abort/", 0, 1);
  ASSERT_TRUE(comm.ok()) << comm.status();
  DeviceBytes buf(0, 64);
  (*comm)->Abort();
  EXPECT_EQ((*comm)
                ->AllReduce(buf.at(0), buf.at(0), 16, DType::kFp32, ReduceOp::kSum)
                ->Wait(absl::Seconds(5))
                .code(),
            absl::StatusCode::kAborted);
}

std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  const int w = std::get<0>(info.param);
  return absl::StrCat(w == 0 ? std::string("all_devices") : absl::StrCat("n", w), "_count",
                      std::get<1>(info.param), "_",
                      std::get<2>(info.param) == DType::kFp32 ? "fp32" : "bf16");
}

INSTANTIATE_TEST_SUITE_P(WorldsCountsDtypes, NcclCollectivesTest,
                         ::testing::Combine(::testing::Values(1, 0),
                                            ::testing::Values<int64_t>(1, 7, 1000, 10007),
                                            ::testing::Values(DType::kFp32, DType::kBf16)),
                         ParamName);

}  // namespace
}  // namespace zeroshard::testing

int main(int argc, char** argv) {
  auto devices = zeroshard::CudaDeviceCount();
  if (!devices.ok()) {
    std::printf("SKIPPED: no usable GPU: %s\n", devices.status().ToString().c_str());
    return 77;
  }
  zeroshard::testing::g_devices = *devices;
  std::printf("running on %d CUDA device(s)\n", *devices);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
