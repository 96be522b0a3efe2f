// `zeroshard launch --device cuda` end to end on one GPU (real binaries,
// loopback): the model computes on the GPU (CudaKernels) and 200 steps of
// `small` lower the loss as the same job on the CPU does; two ranks sharing
// the GPU through the host-staged backend at stage 3 follow one rank at
// stage 0 within 1e-4 relative, step by step (fp32). Needs a GPU: exits 77
// (CTest: skipped) with the reason printed when there is none.
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/support/gpu_test_main.h"
#include "tests/support/subprocess.h"
#include "tests/trainer/step_log.h"
#include "worker/trainer/step_record.h"

namespace zeroshard {
namespace {

using testing::BinPath;
using testing::CommandResult;
using testing::MakeTempDir;
using testing::ReadStepRecords;
using testing::RunCommand;

// The loss of every step `zeroshard launch <args>` logged; empty (and a
// test failure) when the launch fails.
std::vector<double> Train(const std::string& dir, const std::string& name,
                          const std::string& args) {
  const std::string log = absl::StrCat(dir, "/", name, ".jsonl");
  CommandResult r = RunCommand(absl::StrCat(
      BinPath("zeroshard"), " launch --model small --global-batch 16 --micro-batch 4 --seed 7",
      " --eval-every 0 --run-dir ", dir, "/", name, " --log ", log, " ", args));
  EXPECT_EQ(r.exit_code, 0) << name << ":\n" << r.output;
  std::vector<double> losses;
  for (const StepRecord& record : ReadStepRecords(log)) losses.push_back(record.loss);
  return losses;
}

double MeanOfLast(const std::vector<double>& v, size_t n) {
  return std::accumulate(v.end() - static_cast<long>(n), v.end(), 0.0) / static_cast<double>(n);
}

TEST(LaunchCudaTest, TrainsSmallAsTheCpuDoes) {
  const std::string dir = MakeTempDir("zs_launch_cuda");
  const std::string job = "--workers 1 --stage 0 --steps 200 --threads 2";
  const std::vector<double> cpu = Train(dir, "cpu", job + " --device cpu");
  const std::vector<double> gpu = Train(dir, "cuda", job + " --device cuda");
  ASSERT_EQ(cpu.size(), 200u);
  ASSERT_EQ(gpu.size(), 200u);
  // The same weights and batch: step 1 agrees to the kernels' tolerance.
  EXPECT_NEAR(gpu[0], cpu[0], 1e-5 * cpu[0]);
  // After 200 steps the curves have drifted apart in the last bits, but
  // both have fallen, by the same amount within 2%.
  const double cpu_end = MeanOfLast(cpu, 10), gpu_end = MeanOfLast(gpu, 10);
  EXPECT_LT(gpu_end, gpu[0] - 1.0) << "the GPU run did not learn";
  EXPECT_NEAR(gpu_end, cpu_end, 0.02 * cpu_end);
}

TEST(LaunchCudaTest, TwoRanksSharingTheGpuFollowOneRank) {
  const std::string dir = MakeTempDir("zs_launch_cuda_shared");
  const std::vector<double> one =
      Train(dir, "n1", "--device cuda --workers 1 --stage 0 --steps 10");
  const std::vector<double> two =
      Train(dir, "n2", "--device cuda --workers 2 --stage 3 --backend host-staged --steps 10");
  ASSERT_EQ(one.size(), 10u);
  ASSERT_EQ(two.size(), 10u);
  for (size_t s = 0; s < one.size(); ++s) {
    EXPECT_NEAR(two[s], one[s], 1e-4 * std::abs(one[s])) << "step " << s + 1;
  }
}

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  return zeroshard::testing::RunGpuTestsOrSkip("launch_cuda_test", argc, argv);
}
