// The fixture of the CPU collective tests (collectives_test.cc,
// group_collectives_test.cc): backends (Gloo over loopback TCP, shm with
// 4 KiB slots so ops span many rounds) x world sizes x element counts x
// dtypes (STYLE.md point 15), ranks as threads over one InMemoryStore, each
// backend and world size connected once per suite.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/comm/rank_threads.h"
#include "worker/comm/shm_collectives.h"

namespace zeroshard::testing {

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

inline std::string ParamName(const ::testing::TestParamInfo<Param>& info) {
  return absl::StrCat(std::get<0>(info.param), "_n", std::get<1>(info.param), "_count",
                      std::get<2>(info.param), "_",
                      std::get<3>(info.param) == DType::kFp32 ? "fp32" : "bf16");
}

// 20011 elements pass the shm all-reduce's one-round limit
// (kShmOneRoundElements): its two-round path.
static_assert(20011 > kShmOneRoundElements);
// 20011 elements pass the shm all-reduce's one-round limit
// (kShmOneRoundElements): its two-round path.
static_assert(20011 > kShmOneRoundElements);
inline auto CollectiveParams() {
  return ::testing::Combine(::testing::Values("gloo", "shm"), ::testing::Values(1, 2, 3, 5, 8),
                            ::testing::Values<int64_t>(1, 7, 1000, 10007, 20011),
                            ::testing::Values(DType::kFp32, DType::kBf16));
}

}  // namespace zeroshard::testing
