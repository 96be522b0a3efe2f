// The host-staged backend on a real GPU: 2 and 4 ranks as threads sharing
// GPU 0 (what NCCL refuses), each with its own CudaDevice and device buffers
// from it; results equal to rank_threads.h's CPU references. Needs a GPU:
// exits 77 (CTest: skipped) with the reason printed when there is none.
#include <cstdio>
#include <map>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/comm/host_staged_util.h"
#include "tests/support/gpu_test_main.h"
#include "worker/device/device_factory.h"

namespace zeroshard::testing {
namespace {

StagedWorld Connect(int n) {
  static auto* store = new InMemoryStore();
  return ConnectStaged(*store, absl::StrCat("cuda", n, "/"), n,
                       [] { return CreateDevice({.kind = "cuda", .ordinal = 0}); });
}

class HostStagedCudaTest : public ::testing::TestWithParam<StagedParam> {
 protected:
  static void TearDownTestSuite() { Pool().clear(); }
  static std::map<int, StagedWorld>& Pool() {
    static auto* pool = new std::map<int, StagedWorld>();
    return *pool;
  }

  void SetUp() override {
    const auto [n, count, dtype] = GetParam();
    if (!Pool().contains(n)) Pool()[n] = Connect(n);
    StagedWorld& world = Pool()[n];
    ASSERT_EQ(static_cast<int>(world.comms.size()), n);
    for (int r = 0; r < n; ++r) {
      run_.comms.push_back(world.comms[r].get());
      run_.devices.push_back(world.devices[r].get());
    }
    run_.count = count;
    run_.dtype = dtype;
  }

  StagedRun run_;
};

TEST_P(HostStagedCudaTest, AllGather) {
  for (bool in_place : {false, true}) {
    run_.in_place = in_place;
    ExpectAllGathered(run_, RunAllGather(run_));
  }
}

TEST_P(HostStagedCudaTest, ReduceScatter) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    for (bool in_place : {false, true}) {
      run_.in_place = in_place;
      ExpectReduced(run_, op, RunReduceScatter(run_, op), /*scattered=*/true);
    }
  }
}

TEST_P(HostStagedCudaTest, AllReduce) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    for (bool in_place : {false, true}) {
      run_.in_place = in_place;
      ExpectReduced(run_, op, RunAllReduce(run_, op), /*scattered=*/false);
    }
  }
}

TEST_P(HostStagedCudaTest, BroadcastFromEveryRoot) {
  for (int root = 0; root < run_.n(); ++root) {
    run_.in_place = root % 2 == 1;
    const auto got = RunBroadcast(run_, root);
    for (int r = 0; r < run_.n(); ++r) {
      ASSERT_EQ(Decode(got[r], run_.dtype), InputValues(root, run_.count))
          << "rank " << r << " root " << root;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(SharedGpu, HostStagedCudaTest,
                         ::testing::Combine(::testing::Values(2, 4),
                                            ::testing::Values<int64_t>(1, 7, 1000, 10007),
                                            ::testing::Values(DType::kFp32, DType::kBf16)),
                         StagedParamName);

}  // namespace
}  // namespace zeroshard::testing

int main(int argc, char** argv) {
  return zeroshard::testing::RunGpuTestsOrSkip("host_staged_cuda_test", argc, argv);
}
