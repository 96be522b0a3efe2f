// ZeRO-Offload on a GPU worker: the engine on the CUDA device (NCCL, N = 1)
// with the optimizer state in pinned host memory (AdamWCpu on the host, the
// gradient shard copied down and the new compute shard copied back before
// the all-gather) or in NVMe files, against the same run with the state in
// GPU memory: parameters and gradient norms after 10 steps bit-equal (the
// CPU AdamW is bit-identical to the CUDA kernel, worker/optim/adamw.h),
// stages 0-3, fp32 and bf16. Needs a GPU: exits 77 (CTest: skipped) with
// the reason printed when there is none.
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_runner.h"
#include "tests/support/gpu_test_main.h"
#include "worker/comm/communicator_factory.h"
#include "worker/comm/in_memory_store.h"
#include "worker/device/device_factory.h"

namespace zeroshard::testing {
namespace {

const MlpDims kDims{3, 7};

absl::StatusOr<RankResult> RunCuda(RunConfig config, const std::string& tag) {
  RankResult out;
  InMemoryStore store;
  ZS_RETURN_IF_ERROR(RunRanksAsThreads(1, tag, [&](int r, Communicator* control) -> absl::Status {
    ZS_ASSIGN_OR_RETURN(std::unique_ptr<Device> device, CreateDevice({"cuda", 0}));
    CommunicatorOptions o;
    o.device = device.get();
    ZS_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> data,
                        CreateCommunicator("nccl", store, "data/" + tag, r, 1, o));
    config.device = device.get();
    config.control_comm = control;
    ZS_ASSIGN_OR_RETURN(out, TrainRank(kDims, RefAdamW{}, config, data.get()));
    return absl::OkStatus();
  }));
  return out;
}

TEST(EngineOffloadCudaTest, HostAndNvmeStoresBitEqualToGpuMemory) {
  for (int stage = 0; stage <= 3; ++stage) {
    for (DType dtype : {DType::kFp32, DType::kBf16}) {
      RunConfig config;
      config.stage = stage;
      config.compute = config.reduce = dtype;
      const std::string base = absl::StrCat("s", stage, DTypeName(dtype));
      absl::StatusOr<RankResult> want = RunCuda(config, base + "dev");
      ASSERT_TRUE(want.ok()) << want.status();
      for (OffloadTarget t : {OffloadTarget::kHost, OffloadTarget::kNvme}) {
        config.offload = {t, "/tmp", "", false};
        absl::StatusOr<RankResult> got =
            RunCuda(config, base + std::to_string(static_cast<int>(t)));
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_EQ(got->grad_norms, want->grad_norms) << base;
        for (size_t u = 0; u < want->params.size(); ++u) {
          EXPECT_EQ(std::memcmp(got->params[u].data(), want->params[u].data(),
                                want->params[u].size() * 4),
                    0)
              << base << " target " << static_cast<int>(t) << " unit " << u;
        }
      }
    }
  }
}

}  // namespace
}  // namespace zeroshard::testing

int main(int argc, char** argv) {
  return zeroshard::testing::RunGpuTestsOrSkip("engine_offload_cuda_test", argc, argv);
}
