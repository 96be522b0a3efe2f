// The CUDA AdamW kernel against the CPU reference on odd sizes, bit for bit
// (same operations, no FMA: worker/optim/adamw_cuda.cu). Needs a GPU: exits 77
// (CTest: skipped) with the reason printed when there is none.
#include "worker/optim/adamw_cuda.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "worker/optim/adamw.h"

namespace zeroshard {
namespace {

template <typename T>
T* ToDevice(const std::vector<T>& host) {
  void* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, std::max<size_t>(1, host.size() * sizeof(T))), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return static_cast<T*>(d);
}

template <typename T>
std::vector<T> ToHost(const T* d, size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(cudaMemcpy(host.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

class AdamWCudaTest : public ::testing::TestWithParam<std::tuple<int64_t, bool>> {};

TEST_P(AdamWCudaTest, BitIdenticalToReference) {
  const int64_t n = std::get<0>(GetParam());
  const bool bf16_out = std::get<1>(GetParam());
  const DType dtype = bf16_out ? DType::kBf16 : DType::kFp32;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> master(n), m(n, 0.0f), v(n, 0.0f), grad(n), out32(n);
  std::vector<bf16> out16(n);
  for (int64_t i = 0; i < n; ++i) master[i] = normal(rng);
  float *d_master = ToDevice(master), *d_m = ToDevice(m), *d_v = ToDevice(v);
  float* d_grad = ToDevice(grad);
  void* d_out =
      bf16_out ? static_cast<void*>(ToDevice(out16)) : static_cast<void*>(ToDevice(out32));
  const AdamWHyperparams hp{1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f};
  for (int step = 1; step <= 3; ++step) {
    for (int64_t i = 0; i < n; ++i) grad[i] = normal(rng) * 0.1f;
    ASSERT_EQ(cudaMemcpy(d_grad, grad.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
    AdamWReference(
        hp, step, 0.5f,
        {master.data(), m.data(), v.data(), grad.data(), n,
         bf16_out ? static_cast<void*>(out16.data()) : static_cast<void*>(out32.data()), dtype});
    ASSERT_TRUE(
        AdamWCuda(hp, step, 0.5f, {d_master, d_m, d_v, d_grad, n, d_out, dtype}, nullptr).ok());
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(std::memcmp(ToHost(d_master, n).data(), master.data(), n * 4), 0);
  EXPECT_EQ(std::memcmp(ToHost(d_m, n).data(), m.data(), n * 4), 0);
  EXPECT_EQ(std::memcmp(ToHost(d_v, n).data(), v.data(), n * 4), 0);
  if (bf16_out) {
    EXPECT_EQ(ToHost(static_cast<bf16*>(d_out), n), out16);
  } else {
    EXPECT_EQ(std::memcmp(ToHost(static_cast<float*>(d_out), n).data(), out32.data(), n * 4), 0);
  }
  for (void* p : {static_cast<void*>(d_master), static_cast<void*>(d_m), static_cast<void*>(d_v),
                  static_cast<void*>(d_grad), d_out}) {
    cudaFree(p);
  }
}

INSTANTIATE_TEST_SUITE_P(OddSizes, AdamWCudaTest,
                         ::testing::Combine(::testing::Values(1, 7, 1000, 10007, 1000003),
                                            ::testing::Bool()));

}  // namespace
}  // namespace zeroshard

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t err = cudaGetDeviceCount(&devices);
  if (err != cudaSuccess || devices == 0) {
    std::printf("SKIP: no CUDA device (%s)\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "device count is 0");
    return 77;
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
