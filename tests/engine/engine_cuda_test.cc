// The engine on the CUDA device against the engine on the CPU device (itself
// checked against the unsharded reference by engine_equivalence_test), with
// gradients the test MLP computes on the host (HostHooks): stages 0-3, fp32
// and bf16, through NCCL at N = 1 and through the host-staged backend with
// 2 and 4 ranks (threads) sharing GPU 0, as NCCL refuses several ranks on
// one GPU. Tolerances as engine_equivalence_test: max |a - b| / max(|b|,
// 0.1) <= 1e-5 with fp32 compute and reduce, 1e-2 with bf16 (the device
// primitives are bit-identical to the CPU's; only the squared-norm sum
// order and the collectives' summation order differ). Needs a GPU: exits 77
// (CTest: skipped) with the reason printed when there is none.
#include <cmath>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "tests/engine/engine_runner.h"
#include "tests/support/gpu_test_main.h"
#include "worker/comm/communicator_factory.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/in_memory_store.h"
#include "worker/device/device_factory.h"

namespace zeroshard::testing {
namespace {

const MlpDims kDims{3, 7};

double MaxRel(const RankResult& got, const RankResult& want) {
  double worst = 0.0;
  for (size_t u = 0; u < want.params.size(); ++u) {
    for (size_t i = 0; i < want.params[u].size(); ++i) {
      const double b = want.params[u][i];
      worst = std::max(worst, std::fabs(got.params[u][i] - b) / std::max(std::fabs(b), 0.1));
    }
  }
  return worst;
}

// One config on n ranks (threads): the CPU device over Gloo, then the CUDA
// device over `backend` ("nccl" or "host-staged") with a Gloo control
// communicator. Rank 0's results of both.
absl::Status RunBoth(int n, const std::string& backend, RunConfig config, RankResult* cpu,
                     RankResult* cuda) {
  std::vector<RankResult> cpu_r(n), cuda_r(n);
  ZS_RETURN_IF_ERROR(RunRanksAsThreads(n, absl::StrCat("cpu", config.stage, backend),
                                       [&](int r, Communicator* comm) -> absl::Status {
                                         ZS_ASSIGN_OR_RETURN(
                                             cpu_r[r], TrainRank(kDims, RefAdamW{}, config, comm));
                                         return absl::OkStatus();
                                       }));
  InMemoryStore store;
  ZS_RETURN_IF_ERROR(RunRanksAsThreads(
      n, absl::StrCat("ctl", config.stage, backend),
      [&](int r, Communicator* control) -> absl::Status {
        ZS_ASSIGN_OR_RETURN(std::unique_ptr<Device> device, CreateDevice({"cuda", 0}));
        CommunicatorOptions o;
        o.device = device.get();
        ZS_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> data,
                            CreateCommunicator(backend, store, "data/", r, n, o));
        RunConfig c = config;
        c.device = device.get();
        c.control_comm = control;
        ZS_ASSIGN_OR_RETURN(cuda_r[r], TrainRank(kDims, RefAdamW{}, c, data.get()));
        return absl::OkStatus();
      }));
  *cpu = cpu_r[0];
  *cuda = cuda_r[0];
  return absl::OkStatus();
}

class EngineCudaTest : public ::testing::TestWithParam<std::tuple<int, std::string>> {};

TEST_P(EngineCudaTest, MatchesTheCpuDevice) {
  const auto [n, backend] = GetParam();
  for (int stage = 0; stage <= 3; ++stage) {
    for (DType dtype : {DType::kFp32, DType::kBf16}) {
      RunConfig config;
      config.stage = stage;
      config.compute = config.reduce = dtype;
      config.steps = 4;
      RankResult cpu, cuda;
      absl::Status s = RunBoth(n, backend, config, &cpu, &cuda);
      ASSERT_TRUE(s.ok()) << s;
      const double worst = MaxRel(cuda, cpu), tol = dtype == DType::kFp32 ? 1e-5 : 1e-2;
      std::printf("N=%d %s stage %d %s: max rel %.2e (limit %.0e)\n", n, backend.c_str(), stage,
                  std::string(DTypeName(dtype)).c_str(), worst, tol);
      EXPECT_LE(worst, tol) << "stage " << stage << " " << DTypeName(dtype);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, EngineCudaTest,
                         ::testing::Values(std::tuple{1, std::string("nccl")},
                                           std::tuple{2, std::string("host-staged")},
                                           std::tuple{4, std::string("host-staged")}),
                         [](const auto& info) {
                           return absl::StrCat(
                               "N", std::get<0>(info.param), "_",
                               std::get<1>(info.param) == "nccl" ? "nccl" : "staged");
                         });

}  // namespace
}  // namespace zeroshard::testing

int main(int argc, char** argv) {
  return zeroshard::testing::RunGpuTestsOrSkip("engine_cuda_test", argc, argv);
}
