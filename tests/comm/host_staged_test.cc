// The host-staged backend over CpuDevices: ranks as threads over an
// InMemoryStore, each Gloo communicator wrapped for its own CpuDevice. Results
// equal to rank_threads.h's references and to plain Gloo's, over world sizes
// x counts x dtypes, in place and out of place (STYLE.md points 15-17).
#include <map>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/comm/host_staged_util.h"
#include "worker/device/cpu_device.h"

namespace zeroshard::testing {
namespace {

// Connected ranks of one world size: staged and plain Gloo side by side,
// Gloo on the staged ranks' devices' (host) memory.
struct World {
  StagedWorld staged;
  std::vector<std::unique_ptr<Communicator>> gloo;
};

World Connect(int n) {
  static auto* store = new InMemoryStore();
  World world;
  world.staged = ConnectStaged(*store, absl::StrCat("staged", n, "/"), n,
                               [] { return std::unique_ptr<Device>(new CpuDevice(1)); });
  for (auto& c : ConnectGloo(*store, absl::StrCat("gloo", n, "/"), n)) {
    EXPECT_TRUE(c.ok()) << c.status();
    if (c.ok()) world.gloo.push_back(std::move(*c));
  }
  return world;
}

class HostStagedTest : public ::testing::TestWithParam<StagedParam> {
 protected:
  // Each world size connects once; its communicators stay usable.
  static void TearDownTestSuite() { Pool().clear(); }
  static std::map<int, World>& Pool() {
    static auto* pool = new std::map<int, World>();
    return *pool;
  }

  void SetUp() override {
    const auto [n, count, dtype] = GetParam();
    if (!Pool().contains(n)) Pool()[n] = Connect(n);
    World& world = Pool()[n];
    ASSERT_EQ(static_cast<int>(world.staged.comms.size()), n);
    ASSERT_EQ(static_cast<int>(world.gloo.size()), n);
    for (int r = 0; r < n; ++r) {
      staged_.comms.push_back(world.staged.comms[r].get());
      staged_.devices.push_back(world.staged.devices[r].get());
      gloo_.comms.push_back(world.gloo[r].get());
      gloo_.devices.push_back(world.staged.devices[r].get());  // Host memory: what Gloo takes.
    }
    staged_.count = gloo_.count = count;
    staged_.dtype = gloo_.dtype = dtype;
  }
  void SetInPlace(bool in_place) { staged_.in_place = gloo_.in_place = in_place; }

  StagedRun staged_, gloo_;
};

TEST_P(HostStagedTest, AllGather) {
  for (bool in_place : {false, true}) {
    SetInPlace(in_place);
    const auto got = RunAllGather(staged_);
    ExpectAllGathered(staged_, got);
    EXPECT_EQ(got, RunAllGather(gloo_)) << "in_place " << in_place;
  }
}

TEST_P(HostStagedTest, ReduceScatter) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    for (bool in_place : {false, true}) {
      SetInPlace(in_place);
      const auto got = RunReduceScatter(staged_, op);
      ExpectReduced(staged_, op, got, /*scattered=*/true);
      EXPECT_EQ(got, RunReduceScatter(gloo_, op)) << "in_place " << in_place;
    }
  }
}

TEST_P(HostStagedTest, AllReduce) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
    for (bool in_place : {false, true}) {
      SetInPlace(in_place);
      const auto got = RunAllReduce(staged_, op);
      ExpectReduced(staged_, op, got, /*scattered=*/false);
      EXPECT_EQ(got, RunAllReduce(gloo_, op)) << "in_place " << in_place;
    }
  }
}

TEST_P(HostStagedTest, BroadcastFromEveryRoot) {
  for (int root = 0; root < staged_.n(); ++root) {
    SetInPlace(root % 2 == 1);  // Odd roots in place, even ones out of place.
    const auto got = RunBroadcast(staged_, root);
    for (int r = 0; r < staged_.n(); ++r) {
      ASSERT_EQ(Decode(got[r], staged_.dtype), InputValues(root, staged_.count))
          << "rank " << r << " root " << root;
    }
    EXPECT_EQ(got, RunBroadcast(gloo_, root));
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizesCountsDtypes, HostStagedTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 5),
                                            ::testing::Values<int64_t>(1, 7, 1000, 10007),
                                            ::testing::Values(DType::kFp32, DType::kBf16)),
                         StagedParamName);

}  // namespace
}  // namespace zeroshard::testing
