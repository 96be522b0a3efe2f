// GptModel on a CUDA device (CudaKernels, activations and token ids in
// device memory, the loss summed there) against the same model on the CPU
// (CpuKernels), from the same weights and batch, for the `small` preset with
// and without activation checkpointing: the training loss and every unit's
// gradient, the evaluation loss and the logits, within the tolerance of
// cuda_kernels_test_util.h (1e-5 relative in fp32); with bf16 matmuls, within
// 1e-2 (loss) and 5e-2 (gradients). Needs a GPU: exits 77 (CTest: skipped)
// with the reason printed when there is none.
#include <cmath>
#include <memory>
#include <vector>

#include "common/model/model_config.h"
#include "tests/model/cuda_kernels_test_util.h"
#include "tests/support/gpu_test_main.h"
#include "worker/model/gpt_model.h"
#include "worker/model/local_params.h"
#include "worker/model/model_init.h"

namespace zeroshard::cuda_kernels_test {
namespace {

// `small`'s weights (seed 7) and a random batch of B = 2 full contexts;
// scale = 1 / tokens (the mean loss's gradient).
struct SmallJob {
  ModelConfig config = *ModelPreset("small");
  int B = 2, T = config.n_ctx;
  std::vector<std::vector<float>> units = InitUnits(config, 7);
  std::vector<int32_t> inputs, targets;
  float scale = 1.0f / static_cast<float>(B * T);
  explicit SmallJob(uint32_t seed)
      : inputs(RandomTokens(int64_t{B} * T, config.vocab, seed)),
        targets(RandomTokens(int64_t{B} * T, config.vocab, seed + 1)) {}
};

TEST_F(CudaKernelsTest, GptModelMatchesTheCpuModel) {
  const SmallJob job(1);
  const ModelConfig* config = &job.config;
  const int B = job.B, T = job.T;
  const std::vector<std::vector<float>>& units = job.units;
  const std::vector<int32_t>& inputs = job.inputs;
  const std::vector<int32_t>& targets = job.targets;
  const float scale = job.scale;
  for (ActivationCheckpointing mode :
       {ActivationCheckpointing::kNone, ActivationCheckpointing::kBlocks}) {
    const std::string what = mode == ActivationCheckpointing::kNone ? "no checkpointing" : "blocks";
    LocalParams cpu_params(units);
    GptModel cpu(*config, mode);
    absl::StatusOr<double> cpu_loss =
        cpu.ForwardBackward(inputs.data(), targets.data(), B, T, scale, cpu_params);
    ASSERT_TRUE(cpu_loss.ok()) << cpu_loss.status();

    CudaKernelsOptions options;
    options.vocab = config->vocab;
    std::unique_ptr<CudaKernels> k = MakeKernels(options);
    ASSERT_NE(k, nullptr);
    DeviceParams gpu_params(*this, units);
    GptModel gpu(*config, mode, *k, device_.get());
    absl::StatusOr<double> gpu_loss =
        gpu.ForwardBackward(inputs.data(), targets.data(), B, T, scale, gpu_params);
    ASSERT_TRUE(gpu_loss.ok()) << gpu_loss.status();
    EXPECT_NEAR(*gpu_loss, *cpu_loss, kFp32Tolerance * std::fabs(*cpu_loss)) << what;
    for (size_t u = 0; u < units.size(); ++u) {
      EXPECT_CLOSE(Down(gpu_params.grads(static_cast<int>(u)), units[u].size()),
                   cpu_params.grads(static_cast<int>(u)), kFp32Tolerance,
                   ::testing::Message() << what << ", unit " << u << " gradient");
    }
    EXPECT_EQ(gpu.ActivationBytes(), cpu.ActivationBytes());

    absl::StatusOr<double> cpu_eval = cpu.Forward(inputs.data(), targets.data(), B, T, cpu_params);
    absl::StatusOr<double> gpu_eval = gpu.Forward(inputs.data(), targets.data(), B, T, gpu_params);
    ASSERT_TRUE(cpu_eval.ok() && gpu_eval.ok());
    EXPECT_NEAR(*gpu_eval, *cpu_eval, kFp32Tolerance * std::fabs(*cpu_eval)) << what;
    std::vector<float> cpu_logits, gpu_logits;
    ASSERT_TRUE(cpu.Logits(inputs.data(), B, T, cpu_params, &cpu_logits).ok());
    ASSERT_TRUE(gpu.Logits(inputs.data(), B, T, gpu_params, &gpu_logits).ok());
    EXPECT_CLOSE(gpu_logits, cpu_logits, kFp32Tolerance, what + " logits");
    EXPECT_TRUE(k->TakeStatus().ok());
  }
}

// With bf16 matmuls (a job's --compute-dtype bf16 on a GPU) the model
// stays near the fp32 CPU model: the loss within 1e-2 relative (the kernels'
// bf16 tolerance) and every unit's gradient within 5e-2 of its largest
// magnitude (the rounding of both inputs of every matmul, compounded over
// the layers).
TEST_F(CudaKernelsTest, GptModelWithBf16MatmulsStaysNearTheCpuModel) {
  const SmallJob job(3);
  const ModelConfig* config = &job.config;
  const std::vector<std::vector<float>>& units = job.units;
  LocalParams cpu_params(units);
  GptModel cpu(*config);
  absl::StatusOr<double> cpu_loss = cpu.ForwardBackward(job.inputs.data(), job.targets.data(),
                                                        job.B, job.T, job.scale, cpu_params);
  ASSERT_TRUE(cpu_loss.ok()) << cpu_loss.status();
  CudaKernelsOptions options;
  options.vocab = config->vocab;
  options.bf16_matmul = true;
  std::unique_ptr<CudaKernels> k = MakeKernels(options);
  ASSERT_NE(k, nullptr);
  DeviceParams gpu_params(*this, units);
  GptModel gpu(*config, ActivationCheckpointing::kNone, *k, device_.get());
  absl::StatusOr<double> gpu_loss = gpu.ForwardBackward(job.inputs.data(), job.targets.data(),
                                                        job.B, job.T, job.scale, gpu_params);
  ASSERT_TRUE(gpu_loss.ok()) << gpu_loss.status();
  EXPECT_NEAR(*gpu_loss, *cpu_loss, 1e-2 * std::fabs(*cpu_loss));
  EXPECT_NE(*gpu_loss, *cpu_loss) << "bf16 matmuls must round: the same bits mean fp32 ran";
  for (size_t u = 0; u < units.size(); ++u) {
    EXPECT_CLOSE(Down(gpu_params.grads(static_cast<int>(u)), units[u].size()),
                 cpu_params.grads(static_cast<int>(u)), 5e-2,
                 ::testing::Message() << "bf16, unit " << u << " gradient");
  }
  EXPECT_TRUE(k->TakeStatus().ok());
}

}  // namespace
}  // namespace zeroshard::cuda_kernels_test

int main(int argc, char** argv) {
  return zeroshard::testing::RunGpuTestsOrSkip("model_gpt_cuda_test", argc, argv);
}
