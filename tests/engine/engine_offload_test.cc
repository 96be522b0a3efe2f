// Optimizer-state offload (worker/offload/optimizer_store.h) changes where
// master, m and v live, never the numbers: for N = 1-4 ranks (threads over
// loopback Gloo), stages 0-3, fp32 and bf16 compute, the parameters and
// gradient norms after 10 steps with the host and NVMe stores (io_uring, and
// pread/pwrite forced) are bit-equal to the same run in device memory,
// which engine_equivalence_test checks against an independent reference;
// and at stage 3 the same with the parameter shards in NVMe files too.
// Also: checkpoint state (CopyOptimizerState) is bit-equal, a restore into
// an offloaded engine continues identically, and with the NVMe store the
// resident optimizer bytes are exactly the staging slots:
//   3 slots * 3 arrays * AlignUp(4 * max shard elements, 4096)
// while the offloaded figure is the whole state (12 bytes per element,
// each array rounded up to 4096), and files are removed with the engine.
#include <dirent.h>
#include <stdlib.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_runner.h"
#include "worker/offload/block_file.h"

namespace zeroshard::testing {
namespace {

const MlpDims kDims{3, 7};

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/zs_offload_XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { ::rmdir(path_.c_str()); }
  const std::string& path() const { return path_; }
  int Entries() const {
    DIR* d = opendir(path_.c_str());
    int n = 0;
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
    return n;
  }

 private:
  std::string path_;
};

struct Variant {
  const char* name;
  OffloadTarget target;
  bool force_pread;
};
const Variant kVariants[] = {{"host", OffloadTarget::kHost, false},
                             {"nvme", OffloadTarget::kNvme, false},
                             {"nvme_pread", OffloadTarget::kNvme, true}};

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

class OffloadEquivalence : public ::testing::TestWithParam<int> {};

TEST_P(OffloadEquivalence, BitEqualToDeviceMemory) {
  const int n = GetParam();
  TempDir dir;
  for (int stage = 0; stage <= 3; ++stage) {
    for (DType dtype : {DType::kFp32, DType::kBf16}) {
      RunConfig config;
      config.stage = stage;
      config.compute = config.reduce = dtype;
      const std::string base = absl::StrCat("N", n, "_stage", stage, "_", DTypeName(dtype));
      absl::StatusOr<std::vector<RankResult>> want = RunAll(n, config, base + "_device");
      ASSERT_TRUE(want.ok()) << want.status();
      for (const Variant& v : kVariants) {
        config.offload = {v.target, dir.path(), "", v.force_pread};
        absl::StatusOr<std::vector<RankResult>> got = RunAll(n, config, base + "_" + v.name);
        ASSERT_TRUE(got.ok()) << base << " " << v.name << ": " << got.status();
        for (int r = 0; r < n; ++r) {
          EXPECT_TRUE(BitEqual((*want)[r], (*got)[r])) << base << " " << v.name << " rank " << r;
        }
        EXPECT_EQ(dir.Entries(), 0) << "offload files left behind by " << base << " " << v.name;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, OffloadEquivalence, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return absl::StrCat("N", info.param); });

// Stage-3 parameter offload (--offload-params nvme, param_store.h): fp32
// and bf16 compute, optimizer state in device memory or NVMe files,
// prefetch distances 0, 1, 2 and 5, io_uring and forced pread/pwrite; bit-equal
// to the run with neither offload.
struct ParamVariant {
  const char* name;
  OffloadTarget optimizer;
  int prefetch;
  bool force_pread;
};
const ParamVariant kParamVariants[] = {{"opt_device_d2", OffloadTarget::kDevice, 2, false},
                                       {"opt_nvme_d2", OffloadTarget::kNvme, 2, false},
                                       {"opt_device_d0_pread", OffloadTarget::kDevice, 0, true},
                                       {"opt_nvme_d1", OffloadTarget::kNvme, 1, false},
                                       {"opt_device_d5_pread", OffloadTarget::kDevice, 5, true}};

class ParamOffloadEquivalence : public ::testing::TestWithParam<int> {};

TEST_P(ParamOffloadEquivalence, BitEqualToResidentParams) {
  const int n = GetParam();
  TempDir dir;
  for (DType dtype : {DType::kFp32, DType::kBf16}) {
    RunConfig config;
    config.stage = 3;
    config.compute = config.reduce = dtype;
    const std::string base = absl::StrCat("pN", n, "_", DTypeName(dtype));
    absl::StatusOr<std::vector<RankResult>> want = RunAll(n, config, base + "_resident");
    ASSERT_TRUE(want.ok()) << want.status();
    for (const ParamVariant& v : kParamVariants) {
      config.offload = {v.optimizer, dir.path(), "", v.force_pread};
      config.params_offload = {true, dir.path(), "", v.force_pread, v.prefetch};
      absl::StatusOr<std::vector<RankResult>> got = RunAll(n, config, base + "_" + v.name);
      ASSERT_TRUE(got.ok()) << base << " " << v.name << ": " << got.status();
      for (int r = 0; r < n; ++r) {
        EXPECT_TRUE(BitEqual((*want)[r], (*got)[r])) << base << " " << v.name << " rank " << r;
      }
      EXPECT_EQ(dir.Entries(), 0) << "offload files left behind by " << base << " " << v.name;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ParamOffloadEquivalence, ::testing::Values(1, 2, 3, 4),
                         [](const auto& info) { return absl::StrCat("N", info.param); });

}  // namespace
}  // namespace zeroshard::testing
