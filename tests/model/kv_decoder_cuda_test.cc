// Generation on a CUDA device against the CPU: Kernels::DecodeAttention
// (CudaKernels against CpuKernels over several tiles of 32 positions, GQA
// groups, head sizes 8 to 256, prefill and single tokens; the cache rows it
// stores equal the CPU's exactly), and the KvDecoder of each family
// (parameters, cache and activations in device memory) against the same
// decoder on the CPU: the logits of a prefill and then of one token at a
// time within 1e-4 relative (the CPU sums the softmax in double, the GPU in
// float), and a head size past the kernel's limit refused. Needs a GPU:
// exits 77 (CTest: skipped) with the reason printed when there is none.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "tests/model/cuda_kernels_test_util.h"
#include "tests/model/llama_test_util.h"
#include "tests/support/gpu_test_main.h"
#include "worker/model/cuda_model_kernels.h"
#include "worker/model/kv_decoder.h"
#include "worker/model/model_init.h"

namespace zeroshard::cuda_kernels_test {
namespace {

constexpr double kDecodeTolerance = 1e-4;

void ExpectAttentionMatches(CudaKernelsTest& t, int NH, int KV, int D, int pos, int n) {
  DecodeAttentionShape s{.pos = pos,
                         .n = n,
                         .NH = NH,
                         .KV = KV,
                         .D = D,
                         .P = pos + n + 5,
                         .q_stride = int64_t{NH} * D + 3,
                         .kv_stride = int64_t{KV} * D + 1};
  const std::vector<float> q = Random(n * s.q_stride, 1), k_new = Random(n * s.kv_stride, 2),
                           v_new = Random(n * s.kv_stride, 3);
  // Earlier positions already cached (random; rows past pos + n stay as they are).
  std::vector<float> k_cache = Random(int64_t{KV} * s.P * D, 4);
  std::vector<float> v_cache = Random(int64_t{KV} * s.P * D, 5);
  std::vector<float> out(int64_t{n} * NH * D, 0.0f);
  std::unique_ptr<CudaKernels> k = t.MakeKernels();
  ASSERT_NE(k, nullptr);
  float* dk = t.Up(k_cache);
  float* dv = t.Up(v_cache);
  float* dout = t.Up(out);
  k->DecodeAttention(s, t.Up(q), t.Up(k_new), t.Up(v_new), dk, dv, dout);
  ASSERT_TRUE(k->TakeStatus().ok());
  CudaKernelsTest::Cpu().DecodeAttention(s, q.data(), k_new.data(), v_new.data(), k_cache.data(),
                                         v_cache.data(), out.data());
  const std::string what = "NH " + std::to_string(NH) + " KV " + std::to_string(KV) + " D " +
                           std::to_string(D) + " pos " + std::to_string(pos) + " n " +
                           std::to_string(n);
  EXPECT_TRUE(BitEqual(t.Down(dk, k_cache), k_cache)) << what << ": stored keys";
  EXPECT_TRUE(BitEqual(t.Down(dv, v_cache), v_cache)) << what << ": stored values";
  EXPECT_CLOSE(t.Down(dout, out), out, kDecodeTolerance, what);
}

TEST_F(CudaKernelsTest, DecodeAttentionMatchesTheCpu) {
  ExpectAttentionMatches(*this, 4, 4, 8, 0, 1);     // The first token.
  ExpectAttentionMatches(*this, 4, 2, 16, 0, 37);   // A prefill over two tiles, GQA.
  ExpectAttentionMatches(*this, 8, 2, 64, 70, 1);   // One token after three tiles.
  ExpectAttentionMatches(*this, 6, 3, 256, 31, 3);  // The largest head size.
  ExpectAttentionMatches(*this, 2, 1, 40, 5, 4);    // A head size not a multiple of 32.
}

TEST_F(CudaKernelsTest, DecodeAttentionRefusesAHeadPastTheLimit) {
  const int D = model_cuda::kMaxDecodeHeadDim + 8;
  DecodeAttentionShape s{
      .pos = 0, .n = 1, .NH = 1, .KV = 1, .D = D, .P = 2, .q_stride = D, .kv_stride = D};
  const std::vector<float> x = Random(2 * D, 1);
  std::unique_ptr<CudaKernels> k = MakeKernels();
  ASSERT_NE(k, nullptr);
  float* cache = Up(x);
  float* out = Up(x);
  k->DecodeAttention(s, Up(x), Up(x), Up(x), cache, cache, out);
  const absl::Status st = k->TakeStatus();
  EXPECT_FALSE(st.ok()) << "head size " << D;
  EXPECT_TRUE(BitEqual(Down(out, x), x)) << "nothing ran";
}

void ExpectDecoderMatchesCpu(CudaKernelsTest& t, const ModelConfig& config,
                             const std::string& name) {
  const std::vector<std::vector<float>> units =
      config.is_llama() ? llama_test::RandomUnits(config, 7) : InitUnits(config, 7);
  const int T = std::min(config.n_ctx, 40);
  const std::vector<int32_t> tokens = RandomTokens(T, config.vocab, 3);
  CudaKernelsOptions options;
  options.vocab = config.vocab;
  std::unique_ptr<CudaKernels> k = t.MakeKernels(options);
  ASSERT_NE(k, nullptr);
  absl::StatusOr<std::unique_ptr<KvDecoder>> cpu = CreateKvDecoder(config, units);
  absl::StatusOr<std::unique_ptr<KvDecoder>> gpu =
      CreateKvDecoder(config, units, {.device = t.device_.get(), .kernels = k.get()});
  ASSERT_TRUE(cpu.ok() && gpu.ok()) << name << ": " << cpu.status() << " " << gpu.status();
  std::vector<float> want, got;
  const int prefill = T / 2;
  const std::vector<int32_t> head(tokens.begin(), tokens.begin() + prefill);
  ASSERT_TRUE((*cpu)->Append(head, &want).ok());
  ASSERT_TRUE((*gpu)->Append(head, &got).ok()) << name;
  EXPECT_CLOSE(got, want, kDecodeTolerance, name + " prefill");
  for (int t_ = prefill; t_ < T; ++t_) {
    ASSERT_TRUE((*cpu)->Append({tokens[t_]}, &want).ok());
    ASSERT_TRUE((*gpu)->Append({tokens[t_]}, &got).ok()) << name;
    EXPECT_CLOSE(got, want, kDecodeTolerance, name + " position " + std::to_string(t_));
  }
  EXPECT_EQ((*gpu)->position(), T) << name;
  EXPECT_TRUE(k->TakeStatus().ok()) << name;
}

TEST_F(CudaKernelsTest, Gpt2DecoderMatchesTheCpu) {
  absl::StatusOr<ModelConfig> small = ModelPreset("small");
  ASSERT_TRUE(small.ok());
  ExpectDecoderMatchesCpu(*this, *small, "small");
}

TEST_F(CudaKernelsTest, LlamaDecodersMatchTheCpu) {
  for (const auto& [name, config] : llama_test::OddConfigs()) {
    ExpectDecoderMatchesCpu(*this, config, name);
  }
}

}  // namespace
}  // namespace zeroshard::cuda_kernels_test

int main(int argc, char** argv) {
  return zeroshard::testing::RunGpuTestsOrSkip("model_kv_decoder_cuda_test", argc, argv);
}
