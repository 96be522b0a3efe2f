// LlamaModel on a CUDA device (CudaKernels, activations, rotary tables and
// token ids in device memory) against the same model on the CPU
// (CpuKernels), from the same random weights and batch, on odd configs
// (llama_test_util.h: grouped-query attention with QK-norm and q/k/v bias,
// tied; and with every bias and llama3 rope, untied), with and without
// activation checkpointing: the training loss, every unit's gradient, the
// evaluation loss and the logits within 1e-5 relative (the measure of
// cuda_kernels_test_util.h). The checkpointed run also splits the head into
// 7-token chunks, so the chunk loop runs on the device too. Needs a GPU:
// exits 77 (CTest: skipped) with the reason printed when there is none.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "tests/model/cuda_kernels_test_util.h"
#include "tests/model/llama_test_util.h"
#include "tests/support/gpu_test_main.h"
#include "worker/model/llama_model.h"
#include "worker/model/local_params.h"

namespace zeroshard::cuda_kernels_test {
namespace {

using llama_test::RandomUnits;
using llama_test::Tokens;

void ExpectGpuMatchesCpu(CudaKernelsTest& t, const ModelConfig& c, const std::string& name) {
  const int B = 3, T = c.n_ctx;
  const std::vector<std::vector<float>> units = RandomUnits(c, 7);
  const auto x = Tokens(B * T, c.vocab, 1), y = Tokens(B * T, c.vocab, 2);
  const float scale = 1.0f / (B * T);
  for (ActivationCheckpointing mode :
       {ActivationCheckpointing::kNone, ActivationCheckpointing::kBlocks}) {
    const int chunk = mode == ActivationCheckpointing::kBlocks ? 7 : 0;
    const std::string what = name + " " + ActivationCheckpointingName(mode);
    LocalParams cpu_params(units);
    LlamaModel cpu(c, mode, CpuKernels(), nullptr, chunk);
    absl::StatusOr<double> cpu_loss =
        cpu.ForwardBackward(x.data(), y.data(), B, T, scale, cpu_params);
    ASSERT_TRUE(cpu_loss.ok()) << cpu_loss.status();

    CudaKernelsOptions options;
    options.vocab = c.vocab;
    std::unique_ptr<CudaKernels> k = t.MakeKernels(options);
    ASSERT_NE(k, nullptr);
    DeviceParams gpu_params(t, units);
    LlamaModel gpu(c, mode, *k, t.device_.get(), chunk);
    absl::StatusOr<double> gpu_loss =
        gpu.ForwardBackward(x.data(), y.data(), B, T, scale, gpu_params);
    ASSERT_TRUE(gpu_loss.ok()) << gpu_loss.status();
    EXPECT_NEAR(*gpu_loss, *cpu_loss, kFp32Tolerance * std::fabs(*cpu_loss)) << what;
    for (size_t u = 0; u < units.size(); ++u) {
      const int i = static_cast<int>(u);
      EXPECT_CLOSE(t.Down(gpu_params.grads(i), units[u].size()), cpu_params.grads(i),
                   kFp32Tolerance, ::testing::Message() << what << ", unit " << u << " gradient");
    }
    absl::StatusOr<double> cpu_eval = cpu.Forward(x.data(), y.data(), B, T, cpu_params);
    absl::StatusOr<double> gpu_eval = gpu.Forward(x.data(), y.data(), B, T, gpu_params);
    ASSERT_TRUE(cpu_eval.ok() && gpu_eval.ok());
    EXPECT_NEAR(*gpu_eval, *cpu_eval, kFp32Tolerance * std::fabs(*cpu_eval)) << what;
    std::vector<float> cpu_logits, gpu_logits;
    ASSERT_TRUE(cpu.Logits(x.data(), B, T, cpu_params, &cpu_logits).ok());
    ASSERT_TRUE(gpu.Logits(x.data(), B, T, gpu_params, &gpu_logits).ok());
    EXPECT_CLOSE(gpu_logits, cpu_logits, kFp32Tolerance, what + " logits");
    EXPECT_EQ(gpu.ActivationBytes(), cpu.ActivationBytes()) << what;
    EXPECT_TRUE(k->TakeStatus().ok()) << what;
  }
}

TEST_F(CudaKernelsTest, LlamaModelWithQkNormAndGqaMatchesTheCpuModel) {
  ExpectGpuMatchesCpu(*this, llama_test::QkNormTied(), "qk_norm_tied");
}

TEST_F(CudaKernelsTest, LlamaModelWithBiasesAndLlama3RopeMatchesTheCpuModel) {
  ExpectGpuMatchesCpu(*this, llama_test::GqaUntiedBiases(), "gqa_untied_biases");
}

}  // namespace
}  // namespace zeroshard::cuda_kernels_test

int main(int argc, char** argv) {
  return zeroshard::testing::RunGpuTestsOrSkip("model_llama_cuda_test", argc, argv);
}
