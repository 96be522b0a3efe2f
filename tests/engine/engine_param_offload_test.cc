// Stage-3 parameter offload (--offload-params nvme, worker/offload/
// param_store.h) changes where the compute shards live, never the numbers:
// for N = 1-4 ranks (threads over loopback Gloo), fp32 and bf16 compute,
// optimizer state in device memory and in NVMe files, prefetch distances 0,
// 1, 2 and 5, io_uring and forced pread/pwrite, the parameters and gradient
// norms after 10 steps are bit-equal to the same run without any offload
// (which engine_equivalence_test checks against an independent reference),
// and no file is left behind.
//
// Memory: with params offload the resident parameter bytes are exactly the
// staging slots, independent of the model size:
//   params = (prefetch + 1) * AlignUp(compute bytes * max shard elements, 4096)
// before, during and after steps (the peak too), and the offloaded figure
// is the files, sum over units of AlignUp(compute bytes * S_u, 4096).
#include <dirent.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_runner.h"
#include "worker/offload/block_file.h"

namespace zeroshard::testing {
namespace {

const MlpDims kDims{3, 7};

int Entries(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  int n = 0;
  while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

absl::StatusOr<std::vector<RankResult>> RunAll(int n, const RunConfig& config,
                                               const std::string& tag) {
  std::vector<RankResult> results(n);
  ZS_RETURN_IF_ERROR(RunRanksAsThreads(n, tag, [&](int rank, Communicator* comm) -> absl::Status {
    ZS_ASSIGN_OR_RETURN(results[rank], TrainRank(kDims, RefAdamW{}, config, comm));
    return absl::OkStatus();
  }));
  return results;
}

bool BitEqual(const RankResult& a, const RankResult& b) {
  if (a.params.size() != b.params.size() || a.grad_norms != b.grad_norms) return false;
  for (size_t u = 0; u < a.params.size(); ++u) {
    if (a.params[u].size() != b.params[u].size() ||
        std::memcmp(a.params[u].data(), b.params[u].data(), a.params[u].size() * 4) != 0) {
      return false;
    }
  }
  return true;
}

struct Variant {
  const char* name;
  OffloadTarget optimizer;
  int prefetch;
  bool force_pread;
};
const Variant kVariants[] = {{"opt_device_d2", OffloadTarget::kDevice, 2, false},
                             {"opt_nvme_d2", OffloadTarget::kNvme, 2, false},
                             {"opt_device_d0_pread", OffloadTarget::kDevice, 0, true},
                             {"opt_nvme_d1", OffloadTarget::kNvme, 1, false},
                             {"opt_device_d5_pread", OffloadTarget::kDevice, 5, true}};

class ParamOffloadEquivalence : public ::testing::TestWithParam<int> {};

TEST_P(ParamOffloadEquivalence, BitEqualToResidentParams) {
  const int n = GetParam();
  char tmpl[] = "/tmp/zs_param_offload_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  for (DType dtype : {DType::kFp32, DType::kBf16}) {
    RunConfig config;
    config.stage = 3;
    config.compute = config.reduce = dtype;
    const std::string base = absl::StrCat("pN", n, "_", DTypeName(dtype));
    absl::StatusOr<std::vector<RankResult>> want = RunAll(n, config, base + "_resident");
    ASSERT_TRUE(want.ok()) << want.status();
    for (const Variant& v : kVariants) {
      config.offload = {v.optimizer, dir, "", v.force_pread};
      config.params_offload = {true, dir, "", v.force_pread, v.prefetch};
      absl::StatusOr<std::vector<RankResult>> got = RunAll(n, config, base + "_" + v.name);
      ASSERT_TRUE(got.ok()) << base << " " << v.name << ": " << got.status();
      for (int r = 0; r < n; ++r) {
        EXPECT_TRUE(BitEqual((*want)[r], (*got)[r])) << base << " " << v.name << " rank " << r;
      }
      EXPECT_EQ(Entries(dir), 0) << "offload files left behind by " << base << " " << v.name;
    }
  }
  ::rmdir(dir.c_str());
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ParamOffloadEquivalence, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return absl::StrCat("N", info.param); });

// Twelve units of 20000 elements at N = 1 (shard = unit), stage 3, bf16
// compute, synthetic gradients; prefetch 0 and 2.
TEST(ParamOffloadState, ResidentParamBytesAreTheStagingSlots) {
  constexpr int kUnits = 12;
  constexpr int64_t kNumel = 20000, kBytes = 2 * kNumel;  // bf16.
  std::vector<UnitSpec> specs;
  for (int u = 0; u < kUnits; ++u) {
    specs.push_back({absl::StrCat("u", u), {{absl::StrCat("w", u), {kNumel}, DType::kFp32}}});
  }
  for (int prefetch : {0, 2}) {
    ASSERT_TRUE(RunRanksAsThreads(1, absl::StrCat("param_memory", prefetch),
                                  [&](int, Communicator* comm) -> absl::Status {
      ZS_ASSIGN_OR_RETURN(ShardPlan plan, MakeShardPlan(specs, 1, 1));
      std::vector<std::vector<float>> init(kUnits, std::vector<float>(kNumel, 0.5f));
      RunConfig config;
      config.stage = 3;
      config.compute = DType::kBf16;
      std::unique_ptr<ShardedEngine> engines[2];
      for (int k = 0; k < 2; ++k) {
        config.params_offload = {k == 1, "/tmp", "", false, prefetch};
        ZS_ASSIGN_OR_RETURN(engines[k], ShardedEngine::Create(plan, comm, MakeEngineOptions(config, RefAdamW{}), init));
      }
      ShardedEngine& offloaded = *engines[1];
      const int64_t slots = (prefetch + 1) * AlignUp(kBytes);
      EXPECT_EQ(offloaded.memory().params, slots) << "after Create";
      offloaded.ResetPeakMemory();
      for (int step = 0; step < 3; ++step) {
        for (auto& e : engines) {
          for (int u = 0; u < kUnits; ++u) {
            e->PreForward(u);
            e->PostForward(u);
          }
          for (int u = kUnits - 1; u >= 0; --u) {
            UnitBackwardView view = e->PreBackward(u);
            for (int64_t i = 0; i < kNumel; ++i) view.grads[i] += std::sin(0.01f * i + u + step);
            e->PostBackward(u);
          }
          ZS_RETURN_IF_ERROR(e->Step().status());
        }
      }
      EXPECT_EQ(engines[0]->memory().params, kUnits * kBytes);
      EXPECT_EQ(offloaded.memory().params, slots) << "prefetch " << prefetch;
      EXPECT_EQ(offloaded.peak_memory().params, slots) << "prefetch " << prefetch;
      EXPECT_LT(slots, kUnits * kBytes);  // The bound is below the parameters themselves.
      EXPECT_EQ(offloaded.memory().offloaded, kUnits * AlignUp(kBytes));
      EXPECT_EQ(engines[0]->memory().offloaded, 0);
      for (int u = 0; u < kUnits; ++u) {
        ZS_ASSIGN_OR_RETURN(std::vector<float> x, engines[0]->GatherFullParams(u));
        ZS_ASSIGN_OR_RETURN(std::vector<float> y, offloaded.GatherFullParams(u));
        EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * 4), 0) << "unit " << u;
      }
      return absl::OkStatus();
    }).ok());
  }
}

TEST(ParamOffloadState, RefusedBelowStage3) {
  ASSERT_TRUE(RunRanksAsThreads(1, "param_refused", [&](int, Communicator* comm) -> absl::Status {
    ZS_ASSIGN_OR_RETURN(ShardPlan plan, MakeShardPlan(MlpUnits(kDims), 1, 2));
    RunConfig config;
    config.stage = 2;
    config.params_offload = {true, "/tmp", "", false, 2};
    auto e = ShardedEngine::Create(plan, comm, MakeEngineOptions(config, RefAdamW{}), MlpInit(plan, 1));
    EXPECT_TRUE(absl::IsInvalidArgument(e.status())) << e.status();
    EXPECT_NE(e.status().message().find("stage 3"), std::string::npos) << e.status();
    config.stage = 3;
    config.params_offload.dir = "/nonexistent/zs";
    e = ShardedEngine::Create(plan, comm, MakeEngineOptions(config, RefAdamW{}), MlpInit(plan, 1));
    EXPECT_TRUE(absl::IsFailedPrecondition(e.status())) << e.status();
    EXPECT_NE(e.status().message().find("/nonexistent/zs"), std::string::npos) << e.status();
    return absl::OkStatus();
  }).ok());
}

}  // namespace
}  // namespace zeroshard::testing
