// CudaKernels against CpuKernels (an independent implementation: oneDNN
// sgemm and plain loops) on random inputs at odd shapes, within the tolerance of
// cuda_kernels_test_util.h: matmuls (fp32, TF32 and bf16, every transpose),
// bias, LayerNorm, GELU, Add/Accumulate, Sum. Gradients start from random values
// so the "adds" rule is checked too. Attention, cross-entropy, embeddings
// and the determinism checks are in cuda_kernels_more_test.cc. Needs a GPU:
// exits 77 (CTest: skipped) with the reason printed when there is none.
#include <cmath>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

#include "common/dtype.h"
#include "tests/model/cuda_kernels_test_util.h"
#include "tests/support/gpu_test_main.h"

namespace zeroshard::cuda_kernels_test {
namespace {

// (N rows, C channels): odd sizes (STYLE.md point 15).
const std::vector<std::tuple<int, int>>& RowShapes() {
  static const std::vector<std::tuple<int, int>> shapes = {{1, 8},  {7, 24}, {33, 96},
                                                           {1, 96}, {33, 8}, {7, 257}};
  return shapes;
}

// How a matmul runs, and what its inputs are: fp32; TF32 on inputs already
// TF32 (1e-3: the summation order); bf16 on inputs already bf16 (only the
// summation order differs, 1e-3) or on raw fp32 ones (their rounding shows
// too: the bf16 tolerance, 1e-2).
enum class MatmulMode { kFp32, kTf32, kBf16Rounded, kBf16Raw };

void CheckMatmul(CudaKernelsTest& t, MatmulMode mode, bool ta, bool tb, int M, int N, int K) {
  std::vector<float> A = Random(int64_t{M} * K, 1), B = Random(int64_t{K} * N, 2);
  if (mode == MatmulMode::kTf32) {
    A = ToTf32(std::move(A));
    B = ToTf32(std::move(B));
  }
  if (mode == MatmulMode::kBf16Rounded) {
    for (float& x : A) x = Bf16ToFloat(FloatToBf16(x));
    for (float& x : B) x = Bf16ToFloat(FloatToBf16(x));
  }
  std::vector<float> C = Random(int64_t{M} * N, 3);
  CudaKernelsOptions options;
  options.allow_tf32 = mode == MatmulMode::kTf32;
  options.bf16_matmul = mode == MatmulMode::kBf16Rounded || mode == MatmulMode::kBf16Raw;
  std::unique_ptr<CudaKernels> k = t.MakeKernels(options);
  ASSERT_NE(k, nullptr);
  const float* dA = t.Up(A);
  const float* dB = t.Up(B);
  float* dC = t.Up(C);
  k->Matmul(ta, tb, M, N, K, 0.7f, dA, dB, 0.3f, dC);
  CudaKernelsTest::Cpu().Matmul(ta, tb, M, N, K, 0.7f, A.data(), B.data(), 0.3f, C.data());
  const double tolerance = mode == MatmulMode::kFp32      ? kFp32Tolerance
                           : mode == MatmulMode::kBf16Raw ? 1e-2
                                                          : kTf32Tolerance;
  EXPECT_CLOSE(t.Down(dC, C), C, tolerance,
               ::testing::Message() << "mode=" << static_cast<int>(mode) << " ta=" << ta
                                    << " tb=" << tb << " M=" << M << " N=" << N << " K=" << K);
  EXPECT_TRUE(k->TakeStatus().ok());
}

TEST_F(CudaKernelsTest, MatmulEveryTransposeFp32Tf32AndBf16) {
  const std::vector<std::tuple<int, int, int>> shapes = {
      {1, 8, 7}, {7, 24, 33}, {33, 96, 24}, {17, 1, 5}, {64, 257, 96}};
  for (MatmulMode mode :
       {MatmulMode::kFp32, MatmulMode::kTf32, MatmulMode::kBf16Rounded, MatmulMode::kBf16Raw}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        for (const auto& [M, N, K] : shapes) CheckMatmul(*this, mode, ta, tb, M, N, K);
      }
    }
  }
}

TEST_F(CudaKernelsTest, BiasAddAndBackward) {
  std::unique_ptr<CudaKernels> k = MakeKernels();
  ASSERT_NE(k, nullptr);
  for (const auto& [N, C] : RowShapes()) {
    std::vector<float> out = Random(int64_t{N} * C, 4), dbias = Random(C, 5);
    const std::vector<float> bias = Random(C, 6), dout = Random(int64_t{N} * C, 7);
    float* d_out = Up(out);
    float* d_dbias = Up(dbias);
    k->BiasAdd(d_out, Up(bias), N, C);
    k->BiasBackward(Up(dout), N, C, d_dbias);
    Cpu().BiasAdd(out.data(), bias.data(), N, C);
    Cpu().BiasBackward(dout.data(), N, C, dbias.data());
    EXPECT_CLOSE(Down(d_out, out), out, kFp32Tolerance, ::testing::Message() << N << "x" << C);
    EXPECT_CLOSE(Down(d_dbias, dbias), dbias, kFp32Tolerance,
                 ::testing::Message() << N << "x" << C);
  }
  EXPECT_TRUE(k->TakeStatus().ok());
}

TEST_F(CudaKernelsTest, LayerNormForwardAndBackward) {
  std::unique_ptr<CudaKernels> k = MakeKernels();
  ASSERT_NE(k, nullptr);
  for (const auto& [N, C] : RowShapes()) {
    const int64_t NC = int64_t{N} * C;
    // An offset mean and a spread so the statistics matter.
    std::vector<float> x = Random(NC, 8, 2.0f);
    for (float& v : x) v += 0.5f;
    const std::vector<float> gamma = Random(C, 9), beta = Random(C, 10), dout = Random(NC, 11);
    std::vector<float> out(NC), mean(N), rstd(N);
    std::vector<float> dx = Random(NC, 12), dgamma = Random(C, 13), dbeta = Random(C, 14);
    const float* d_x = Up(x);
    const float* d_gamma = Up(gamma);
    float* d_out = Up(out);
    float* d_mean = Up(mean);
    float* d_rstd = Up(rstd);
    float* d_dx = Up(dx);
    float* d_dgamma = Up(dgamma);
    float* d_dbeta = Up(dbeta);
    k->LayerNormForward(d_x, d_gamma, Up(beta), N, C, d_out, d_mean, d_rstd);
    k->LayerNormBackward(Up(dout), d_x, d_gamma, d_mean, d_rstd, N, C, d_dx, d_dgamma, d_dbeta);
    Cpu().LayerNormForward(x.data(), gamma.data(), beta.data(), N, C, out.data(), mean.data(),
                           rstd.data());
    Cpu().LayerNormBackward(dout.data(), x.data(), gamma.data(), mean.data(), rstd.data(), N, C,
                            dx.data(), dgamma.data(), dbeta.data());
    const ::testing::Message shape = ::testing::Message() << N << "x" << C;
    EXPECT_CLOSE(Down(d_out, out), out, kFp32Tolerance, shape);
    EXPECT_CLOSE(Down(d_mean, mean), mean, kFp32Tolerance, shape);
    EXPECT_CLOSE(Down(d_rstd, rstd), rstd, kFp32Tolerance, shape);
    EXPECT_CLOSE(Down(d_dx, dx), dx, kFp32Tolerance, shape);
    EXPECT_CLOSE(Down(d_dgamma, dgamma), dgamma, kFp32Tolerance, shape);
    EXPECT_CLOSE(Down(d_dbeta, dbeta), dbeta, kFp32Tolerance, shape);
  }
  EXPECT_TRUE(k->TakeStatus().ok());
}

TEST_F(CudaKernelsTest, GeluForwardAndBackward) {
  std::unique_ptr<CudaKernels> k = MakeKernels();
  ASSERT_NE(k, nullptr);
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{10007}}) {
    const std::vector<float> x = Random(n, 15, 3.0f), dout = Random(n, 16);
    std::vector<float> out(n), dx = Random(n, 17);
    const float* d_x = Up(x);
    float* d_out = Up(out);
    float* d_dx = Up(dx);
    k->GeluForward(d_x, n, d_out);
    k->GeluBackward(d_x, Up(dout), n, d_dx);
    Cpu().GeluForward(x.data(), n, out.data());
    Cpu().GeluBackward(x.data(), dout.data(), n, dx.data());
    EXPECT_CLOSE(Down(d_out, out), out, kFp32Tolerance, ::testing::Message() << "n=" << n);
    EXPECT_CLOSE(Down(d_dx, dx), dx, kFp32Tolerance, ::testing::Message() << "n=" << n);
  }
  EXPECT_TRUE(k->TakeStatus().ok());
}

TEST_F(CudaKernelsTest, AddAndAccumulate) {
  std::unique_ptr<CudaKernels> k = MakeKernels();
  ASSERT_NE(k, nullptr);
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{10007}}) {
    const std::vector<float> a = Random(n, 18), b = Random(n, 19);
    std::vector<float> y(n), acc = Random(n, 20);
    float* d_y = Up(y);
    float* d_acc = Up(acc);
    k->Add(Up(a), Up(b), n, d_y);
    k->Accumulate(d_y, n, d_acc);
    Cpu().Add(a.data(), b.data(), n, y.data());
    Cpu().Accumulate(y.data(), n, acc.data());
    // One IEEE addition each: bit-equal, inside any tolerance.
    EXPECT_TRUE(BitEqual(Down(d_y, y), y)) << "n=" << n;
    EXPECT_TRUE(BitEqual(Down(d_acc, acc), acc)) << "n=" << n;
  }
  EXPECT_TRUE(k->TakeStatus().ok());
}

TEST_F(CudaKernelsTest, SumMatchesTheCpu) {
  std::unique_ptr<CudaKernels> k = MakeKernels();
  ASSERT_NE(k, nullptr);
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{100003}}) {
    const std::vector<float> x = Random(n, 22, 3.0f);
    std::vector<double> sum = {-1.0};
    double* d_sum = Up(sum);
    k->Sum(n > 0 ? Up(x) : nullptr, n, d_sum);
    double want = 0.0;
    Cpu().Sum(x.data(), n, &want);
    const std::vector<float> bytes = Down(reinterpret_cast<const float*>(d_sum), 2);
    double got = 0.0;
    std::memcpy(&got, bytes.data(), sizeof(got));
    // Both sum fp32 values in fp64, in different orders.
    EXPECT_NEAR(got, want, 1e-12 * (1.0 + std::fabs(want))) << "n=" << n;
  }
  EXPECT_TRUE(k->TakeStatus().ok());
}

TEST_F(CudaKernelsTest, CreateRefusesACpuDeviceAndABadVocab) {
  absl::StatusOr<std::unique_ptr<Device>> cpu = CreateDevice({.kind = "cpu"});
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(CudaKernels::Create(**cpu).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CudaKernels::Create(*device_, {.vocab = 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zeroshard::cuda_kernels_test

int main(int argc, char** argv) {
  return zeroshard::testing::RunGpuTestsOrSkip("model_cuda_kernels_test", argc, argv);
}
