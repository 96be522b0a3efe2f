// Shared by the CudaKernels tests: a CUDA device with buffers that follow
// the test, random inputs, and the comparison against CpuKernels.
//
// Tolerance (stated once for every test): the error of a GPU tensor g
// against the CPU tensor c is max_i |g_i - c_i| / max(max_i |c_i|, 1e-30),
// which must be <= 1e-5 in fp32 and <= 1e-3 with TF32 matmuls. Any NaN or
// inf in g fails.
//
// TF32 inputs: the tests round the inputs of a TF32 run to TF32 (10
// mantissa bits, ToTf32) first, so the check does not depend on whether the
// GPU rounds or truncates fp32 inputs (a truncation bias alone is ~1e-3);
// the fp32 runs, at 1e-5, would see any TF32 used where it is not allowed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "worker/device/device_buffer.h"
#include "worker/device/device_factory.h"
#include "worker/device/memory_accounting.h"
#include "worker/engine/unit_hooks.h"
#include "worker/model/cuda_kernels.h"
#include "worker/model/kernels.h"

namespace zeroshard::cuda_kernels_test {

constexpr double kFp32Tolerance = 1e-5;
constexpr double kTf32Tolerance = 1e-3;

inline std::vector<float> Random(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// Each value rounded to nearest on TF32's 10 mantissa bits (finite inputs).
inline std::vector<float> ToTf32(std::vector<float> v) {
  for (float& x : v) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    u = (u + 0x1000u) & ~0x1fffu;
    std::memcpy(&x, &u, 4);
  }
  return v;
}

inline std::vector<int32_t> RandomTokens(int64_t n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, vocab - 1);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int32_t& x : v) x = d(rng);
  return v;
}

// The error measure of the header comment; +inf when got has a NaN or inf
// or the sizes differ.
inline double RelativeError(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return INFINITY;
  double err = 0.0, scale = 1e-30;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    err = std::max(err, std::abs(double{got[i]} - double{want[i]}));
    scale = std::max(scale, std::abs(double{want[i]}));
  }
  return err / scale;
}

#define EXPECT_CLOSE(got, want, tolerance, what) \
  EXPECT_LE(::zeroshard::cuda_kernels_test::RelativeError(got, want), tolerance) << (what)

// One CUDA device, its CudaKernels, and device copies of host vectors that
// live as long as the fixture.
// Public so the tests' helper functions can use it.
class CudaKernelsTest : public ::testing::Test {
 public:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Device>> device = CreateDevice({.kind = "cuda", .ordinal = 0});
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = std::move(device).value();
  }
  void TearDown() override {
    if (device_ != nullptr) {
      EXPECT_TRUE(device_->Synchronize(absl::Seconds(60)).ok());
    }
  }

  std::unique_ptr<CudaKernels> MakeKernels(const CudaKernelsOptions& options = {}) {
    absl::StatusOr<std::unique_ptr<CudaKernels>> k = CudaKernels::Create(*device_, options);
    EXPECT_TRUE(k.ok()) << k.status();
    return k.ok() ? std::move(k).value() : nullptr;
  }

  template <typename T>
  T* Up(const std::vector<T>& host) {
    const int64_t bytes = static_cast<int64_t>(host.size() * sizeof(T));
    buffers_.emplace_back(device_.get(), &accountant_, MemoryKind::kBuffers);
    EXPECT_TRUE(buffers_.back().Allocate(bytes).ok());
    EXPECT_TRUE(device_->Copy(buffers_.back().data(), host.data(), bytes).ok());
    EXPECT_TRUE(device_->Synchronize(absl::Seconds(60)).ok());  // host may be a temporary.
    return buffers_.back().template as<T>();
  }

  // The n floats at `p` once everything issued so far has run.
  std::vector<float> Down(const float* p, size_t n) {
    std::vector<float> host(n);
    EXPECT_TRUE(device_->Synchronize(absl::Seconds(60)).ok());
    EXPECT_TRUE(device_->Copy(host.data(), p, static_cast<int64_t>(n * sizeof(float))).ok());
    EXPECT_TRUE(device_->Synchronize(absl::Seconds(60)).ok());
    return host;
  }
  std::vector<float> Down(const float* p, const std::vector<float>& like) {
    return Down(p, like.size());
  }

  static Kernels& Cpu() { return CpuKernels(); }

  std::unique_ptr<Device> device_;
  MemoryAccountant accountant_;
  std::deque<DeviceBuffer> buffers_;
};

// Bit-equality of two float vectors (the determinism checks).
inline bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// UnitHooks over device copies of every unit's parameters, with zeroed
// device gradients (the model tests' hooks on the GPU).
class DeviceParams : public UnitHooks {
 public:
  DeviceParams(CudaKernelsTest& t, const std::vector<std::vector<float>>& units) {
    for (const std::vector<float>& u : units) {
      params_.push_back(t.Up(u));
      grads_.push_back(t.Up(std::vector<float>(u.size(), 0.0f)));
    }
  }
  const float* PreForward(int u) override { return params_[u]; }
  void PostForward(int) override {}
  UnitBackwardView PreBackward(int u) override { return {params_[u], grads_[u]}; }
  void PostBackward(int) override {}
  const float* grads(int u) const { return grads_[u]; }

 private:
  std::vector<float*> params_, grads_;
};

}  // namespace zeroshard::cuda_kernels_test
