// CudaKernels against CpuKernels, continued (tolerance in
// cuda_kernels_test_util.h): causal attention forward and backward (fp32;
// TF32 at 2e-3, see CheckAttention), softmax cross-entropy, embeddings; then determinism: the
// parameter-gradient reductions (embedding, bias, LayerNorm) give the same
// bits on every run, with many repeated tokens; bad targets and tokens give
// NaN, not a write outside the buffers.
#include <tuple>
#include <utility>
#include <vector>

#include "tests/model/cuda_kernels_test_util.h"

namespace zeroshard::cuda_kernels_test {
namespace {

// (B, T, C, NH): odd T and head sizes (hs = 4, 8, 24, 3).
const std::vector<std::tuple<int, int, int, int>>& AttentionShapes() {
  static const std::vector<std::tuple<int, int, int, int>> shapes = {
      {1, 1, 8, 2}, {2, 5, 24, 3}, {1, 17, 96, 4}, {3, 17, 24, 8}, {2, 33, 8, 1}};
  return shapes;
}

void CheckAttention(CudaKernelsTest& t, bool tf32, int B, int T, int C, int NH) {
  const int64_t BT = int64_t{B} * T;
  std::vector<float> qkv = Random(BT * 3 * C, 21), dout = Random(BT * C, 22);
  if (tf32) {
    qkv = ToTf32(std::move(qkv));
    dout = ToTf32(std::move(dout));
  }
  std::vector<float> out(BT * C), att(int64_t{B} * NH * T * T), dqkv = Random(BT * 3 * C, 23);
  std::unique_ptr<CudaKernels> k = t.MakeKernels({.allow_tf32 = tf32});
  ASSERT_NE(k, nullptr);
  const float* d_qkv = t.Up(qkv);
  float* d_out = t.Up(out);
  float* d_att = t.Up(att);
  float* d_dqkv = t.Up(dqkv);
  k->AttentionForward(d_qkv, B, T, C, NH, d_out, d_att);
  k->AttentionBackward(t.Up(dout), d_qkv, d_att, B, T, C, NH, d_dqkv);
  CudaKernelsTest::Cpu().AttentionForward(qkv.data(), B, T, C, NH, out.data(), att.data());
  CudaKernelsTest::Cpu().AttentionBackward(dout.data(), qkv.data(), att.data(), B, T, C, NH,
                                           dqkv.data());
  // With TF32 the probabilities and score gradients the kernels make are
  // full fp32 values entering later TF32 GEMMs, through a chain of three:
  // twice the matmul tolerance.
  const double tolerance = tf32 ? 2 * kTf32Tolerance : kFp32Tolerance;
  const ::testing::Message shape = ::testing::Message() << "tf32=" << tf32 << " B=" << B
                                                        << " T=" << T << " C=" << C << " NH=" << NH;
  EXPECT_CLOSE(t.Down(d_out, out), out, tolerance, shape);
  EXPECT_CLOSE(t.Down(d_att, att), att, tolerance, shape);
  EXPECT_CLOSE(t.Down(d_dqkv, dqkv), dqkv, tolerance, shape);
  EXPECT_TRUE(k->TakeStatus().ok());
}

TEST_F(CudaKernelsTest, AttentionForwardAndBackwardFp32AndTf32) {
  for (bool tf32 : {false, true}) {
    for (const auto& [B, T, C, NH] : AttentionShapes()) CheckAttention(*this, tf32, B, T, C, NH);
  }
}

TEST_F(CudaKernelsTest, SoftmaxCrossEntropyForwardAndBackward) {
  std::unique_ptr<CudaKernels> k = MakeKernels();
  ASSERT_NE(k, nullptr);
  for (const auto& [N, V] : std::vector<std::tuple<int, int>>{{1, 31}, {7, 257}, {33, 31}}) {
    const std::vector<float> logits = Random(int64_t{N} * V, 24, 3.0f);
    std::vector<int32_t> targets = RandomTokens(N, V, 25);
    targets[N / 2] = kIgnoreTarget;  // A position the loss does not count.
    std::vector<float> probs(logits.size()), losses(N), dlogits(logits.size());
    const int32_t* d_targets = Up(targets);
    float* d_probs = Up(probs);
    float* d_losses = Up(losses);
    float* d_dlogits = Up(dlogits);
    k->SoftmaxCrossEntropyForward(Up(logits), d_targets, N, V, d_probs, d_losses);
    k->SoftmaxCrossEntropyBackward(d_probs, d_targets, N, V, 0.25f, d_dlogits);
    Cpu().SoftmaxCrossEntropyForward(logits.data(), targets.data(), N, V, probs.data(),
                                     losses.data());
    Cpu().SoftmaxCrossEntropyBackward(probs.data(), targets.data(), N, V, 0.25f, dlogits.data());
    const ::testing::Message shape = ::testing::Message() << "N=" << N << " V=" << V;
    EXPECT_CLOSE(Down(d_probs, probs), probs, kFp32Tolerance, shape);
    EXPECT_CLOSE(Down(d_losses, losses), losses, kFp32Tolerance, shape);
    EXPECT_CLOSE(Down(d_dlogits, dlogits), dlogits, kFp32Tolerance, shape);
    // In place (probs over logits, dlogits over probs), as the model calls it.
    float* d_inplace = Up(logits);
    k->SoftmaxCrossEntropyForward(d_inplace, d_targets, N, V, d_inplace, d_losses);
    k->SoftmaxCrossEntropyBackward(d_inplace, d_targets, N, V, 0.25f, d_inplace);
    EXPECT_CLOSE(Down(d_inplace, dlogits), dlogits, kFp32Tolerance, shape);
  }
  EXPECT_TRUE(k->TakeStatus().ok());
}

TEST_F(CudaKernelsTest, EmbeddingForwardAndBackward) {
  for (const auto& [B, T, C, V] : std::vector<std::tuple<int, int, int, int>>{
           {1, 1, 8, 31},
           {2, 5, 24, 257},
           {3, 17, 96, 31},
           {4, 33, 300, 256},
           {2, 64, 64, 128256}}) {  // Llama 3's vocabulary: the sorted backward.
    std::unique_ptr<CudaKernels> k = MakeKernels({.vocab = V});
    ASSERT_NE(k, nullptr);
    const int64_t BT = int64_t{B} * T;
    const std::vector<int32_t> tokens = RandomTokens(BT, V, 26);
    const std::vector<float> wte = Random(int64_t{V} * C, 27), wpe = Random(int64_t{T} * C, 28);
    const std::vector<float> dout = Random(BT * C, 29);
    std::vector<float> out(BT * C), dwte = Random(int64_t{V} * C, 30);
    std::vector<float> dwpe = Random(int64_t{T} * C, 31);
    const int32_t* d_tokens = Up(tokens);
    float* d_out = Up(out);
    float* d_dwte = Up(dwte);
    float* d_dwpe = Up(dwpe);
    k->EmbeddingForward(d_tokens, Up(wte), Up(wpe), B, T, C, d_out);
    k->EmbeddingBackward(Up(dout), d_tokens, B, T, C, d_dwte, d_dwpe);
    Cpu().EmbeddingForward(tokens.data(), wte.data(), wpe.data(), B, T, C, out.data());
    Cpu().EmbeddingBackward(dout.data(), tokens.data(), B, T, C, dwte.data(), dwpe.data());
    const ::testing::Message shape = ::testing::Message()
                                     << "B=" << B << " T=" << T << " C=" << C << " V=" << V;
    EXPECT_TRUE(BitEqual(Down(d_out, out), out)) << shape;  // One addition each.
    EXPECT_CLOSE(Down(d_dwte, dwte), dwte, kFp32Tolerance, shape);
    EXPECT_CLOSE(Down(d_dwpe, dwpe), dwpe, kFp32Tolerance, shape);
    EXPECT_TRUE(k->TakeStatus().ok());
  }
}

// Runs each parameter-gradient reduction twice from the same start on a
// shape with ~17 repeats per token; the results must be bit-equal.
TEST_F(CudaKernelsTest, ParameterGradientsAreBitDeterministic) {
  const int B = 8, T = 64, C = 96, V = 31, N = B * T;
  std::unique_ptr<CudaKernels> k = MakeKernels({.vocab = V});
  ASSERT_NE(k, nullptr);
  const int32_t* tokens = Up(RandomTokens(N, V, 32));
  const float* dout = Up(Random(int64_t{N} * C, 33));
  const float* x = Up(Random(int64_t{N} * C, 34));
  const float* gamma = Up(Random(C, 35));
  float* xn = Up(std::vector<float>(int64_t{N} * C));
  float* mean = Up(std::vector<float>(N));
  float* rstd = Up(std::vector<float>(N));
  k->LayerNormForward(x, gamma, gamma, N, C, xn, mean, rstd);
  std::vector<std::vector<float>> runs[2];
  for (std::vector<std::vector<float>>& run : runs) {
    float* dwte = Up(Random(int64_t{V} * C, 36));
    float* dwpe = Up(Random(int64_t{T} * C, 37));
    float* dbias = Up(Random(C, 38));
    float* dx = Up(Random(int64_t{N} * C, 39));
    float* dgamma = Up(Random(C, 40));
    float* dbeta = Up(Random(C, 41));
    k->EmbeddingBackward(dout, tokens, B, T, C, dwte, dwpe);
    k->BiasBackward(dout, N, C, dbias);
    k->LayerNormBackward(dout, x, gamma, mean, rstd, N, C, dx, dgamma, dbeta);
    run = {Down(dwte, int64_t{V} * C),
           Down(dwpe, int64_t{T} * C),
           Down(dbias, C),
           Down(dx, int64_t{N} * C),
           Down(dgamma, C),
           Down(dbeta, C)};
  }
  const char* names[] = {"dwte", "dwpe", "dbias", "dx", "dgamma", "dbeta"};
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(BitEqual(runs[0][i], runs[1][i])) << names[i];
  EXPECT_TRUE(k->TakeStatus().ok());
}

TEST_F(CudaKernelsTest, BadTargetsAndTokensGiveNanNotOutOfBoundsWrites) {
  const int V = 31, C = 8;
  std::unique_ptr<CudaKernels> k = MakeKernels({.vocab = V});
  ASSERT_NE(k, nullptr);
  const int32_t* bad = Up(std::vector<int32_t>{3, V, -1});
  float* logits = Up(Random(3 * V, 42));
  float* losses = Up(std::vector<float>(3));
  k->SoftmaxCrossEntropyForward(logits, bad, 3, V, logits, losses);
  const std::vector<float> l = Down(losses, 3);
  EXPECT_TRUE(std::isfinite(l[0]));
  EXPECT_TRUE(std::isnan(l[1]) && std::isnan(l[2]));
  float* out = Up(std::vector<float>(3 * C));
  k->EmbeddingForward(bad, Up(Random(int64_t{V} * C, 43)), Up(Random(3 * C, 44)), 1, 3, C, out);
  const std::vector<float> o = Down(out, 3 * C);
  EXPECT_TRUE(std::isfinite(o[0]) && std::isnan(o[C]) && std::isnan(o[2 * C]));
  // Backward: the out-of-range tokens add nothing anywhere; token 3 gets its row.
  const std::vector<float> dout = Random(3 * C, 45);
  float* dwte = Up(std::vector<float>(int64_t{V} * C, 0.0f));
  k->EmbeddingBackward(Up(dout), bad, 1, 3, C, dwte, nullptr);
  const std::vector<float> g = Down(dwte, int64_t{V} * C);
  for (int64_t i = 0; i < int64_t{V} * C; ++i) {
    EXPECT_EQ(g[i], i / C == 3 ? dout[i % C] : 0.0f) << "dwte element " << i;
  }
  EXPECT_TRUE(k->TakeStatus().ok());
  EXPECT_TRUE(device_->Synchronize(absl::Seconds(60)).ok());
}

}  // namespace
}  // namespace zeroshard::cuda_kernels_test
