// AdamW: the scalar reference against the paper's formula computed in double;
// every SIMD path and the threaded AdamWCpu against the reference, bit for bit
// (tolerance 0 ulp: all paths perform the same single-precision operations in
// the same order without FMA; see worker/optim/adamw.h), on odd sizes and with
// fp32, bf16 and no compute copy.
#include "worker/optim/adamw.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "worker/optim/adamw_simd.h"

namespace zeroshard {
namespace {

struct State {
  std::vector<float> master, m, v, grad, out32;
  std::vector<bf16> out16;
  explicit State(int64_t n, uint32_t seed) : master(n), m(n), v(n), grad(n), out32(n), out16(n) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int64_t i = 0; i < n; ++i) {
      master[i] = normal(rng);
      grad[i] = normal(rng) * 0.1f;
    }
    if (n > 2) grad[1] = 0.0f;  // A zero gradient exercises v = 0 (eps dominates).
  }
  AdamWShard Shard(DType dtype, bool with_out) {
    return {master.data(),
            m.data(),
            v.data(),
            grad.data(),
            static_cast<int64_t>(master.size()),
            with_out ? (dtype == DType::kFp32 ? static_cast<void*>(out32.data())
                                              : static_cast<void*>(out16.data()))
                     : nullptr,
            dtype};
  }
  void NewGrad(uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& g : grad) g = normal(rng) * 0.1f;
  }
};

bool BitEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

AdamWHyperparams Hp() { return {1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f}; }

TEST(AdamWReferenceTest, MatchesPaperFormulaInDouble) {
  const int64_t n = 1000;
  State s(n, 1);
  std::vector<double> p(s.master.begin(), s.master.end()), m(n, 0.0), v(n, 0.0);
  const AdamWHyperparams hp = Hp();
  const float grad_scale = 0.5f;
  for (int step = 1; step <= 5; ++step) {
    s.NewGrad(100 + step);
    for (int64_t i = 0; i < n; ++i) {
      const double g = static_cast<double>(s.grad[i]) * grad_scale;
      m[i] = hp.beta1 * m[i] + (1.0 - hp.beta1) * g;
      v[i] = hp.beta2 * v[i] + (1.0 - hp.beta2) * g * g;
      const double mh = m[i] / (1.0 - std::pow(double{hp.beta1}, step));
      const double vh = v[i] / (1.0 - std::pow(double{hp.beta2}, step));
      p[i] -= hp.lr * (mh / (std::sqrt(vh) + hp.eps) + hp.weight_decay * p[i]);
    }
    AdamWReference(hp, step, grad_scale, s.Shard(DType::kFp32, true));
  }
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(s.master[i], p[i], 1e-5 * (1.0 + std::fabs(p[i]))) << i;
    ASSERT_EQ(s.out32[i], s.master[i]);
  }
}

struct Path {
  const char* name;
  bool (*supported)();
  void (*run)(const AdamWHyperparams&, int64_t, float, const AdamWShard&);
};

void RunAvx512(const AdamWHyperparams& hp, int64_t step, float gs, const AdamWShard& sh) {
  optim_internal::AdamWAvx512Range(MakeAdamWScalars(hp, step, gs), sh, 0, sh.n);
}
void RunAvx2(const AdamWHyperparams& hp, int64_t step, float gs, const AdamWShard& sh) {
  optim_internal::AdamWAvx2Range(MakeAdamWScalars(hp, step, gs), sh, 0, sh.n);
}
void RunCpu1(const AdamWHyperparams& hp, int64_t step, float gs, const AdamWShard& sh) {
  AdamWCpu(hp, step, gs, sh, 1);
}
void RunCpu3(const AdamWHyperparams& hp, int64_t step, float gs, const AdamWShard& sh) {
  AdamWCpu(hp, step, gs, sh, 3);
}
bool Always() { return true; }

const Path kPaths[] = {{"avx512", optim_internal::CpuHasAvx512, RunAvx512},
                       {"avx2", optim_internal::CpuHasAvx2, RunAvx2},
                       {"cpu_1_thread", Always, RunCpu1},
                       {"cpu_3_threads", Always, RunCpu3}};

class AdamWPathTest : public ::testing::TestWithParam<std::tuple<int, int64_t, int>> {};

TEST_P(AdamWPathTest, BitIdenticalToReference) {
  const Path& path = kPaths[std::get<0>(GetParam())];
  const int64_t n = std::get<1>(GetParam());
  const int out_kind = std::get<2>(GetParam());  // 0 none, 1 fp32, 2 bf16
  if (!path.supported()) GTEST_SKIP() << path.name << " not supported by this CPU";
  const DType dtype = out_kind == 2 ? DType::kBf16 : DType::kFp32;
  State ref(n, 7), got(n, 7);
  for (int step = 1; step <= 3; ++step) {
    ref.NewGrad(step);
    got.NewGrad(step);
    AdamWReference(Hp(), step, 0.25f, ref.Shard(dtype, out_kind != 0));
    path.run(Hp(), step, 0.25f, got.Shard(dtype, out_kind != 0));
  }
  EXPECT_TRUE(BitEqual(ref.master, got.master)) << path.name;
  EXPECT_TRUE(BitEqual(ref.m, got.m)) << path.name;
  EXPECT_TRUE(BitEqual(ref.v, got.v)) << path.name;
  if (out_kind == 1) {
    EXPECT_TRUE(BitEqual(ref.out32, got.out32));
  }
  if (out_kind == 2) {
    EXPECT_EQ(ref.out16, got.out16);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got.out16[i], FloatToBf16(got.master[i])) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(OddSizes, AdamWPathTest,
                         ::testing::Combine(::testing::Range(0, 4),
                                            ::testing::Values(1, 7, 1000, 10007, 300007),
                                            ::testing::Values(0, 1, 2)));

// Ranges long enough for non-temporal stores of the compute copy
// (kStreamingStoreElements), split at offsets that leave the copy unaligned
// (the kernels peel elements up to an aligned address): the reference's bits.
TEST(AdamWStreamingTest, LongRangesFromAnyOffsetMatchTheReference) {
  using Range = void (*)(const AdamWScalars&, const AdamWShard&, int64_t, int64_t);
  const struct {
    const char* name;
    bool (*supported)();
    Range range;
  } kernels[] = {{"avx512", optim_internal::CpuHasAvx512, optim_internal::AdamWAvx512Range},
                 {"avx2", optim_internal::CpuHasAvx2, optim_internal::AdamWAvx2Range}};
  const int64_t n = optim_internal::kStreamingStoreElements + 37;
  const AdamWScalars scalars = MakeAdamWScalars(Hp(), 2, 0.5f);
  for (const auto& k : kernels) {
    if (!k.supported()) continue;
    for (DType dtype : {DType::kFp32, DType::kBf16}) {
      for (int64_t split : {0, 1, 3, 6}) {
        State ref(n, 11), got(n, 11);
        AdamWReference(Hp(), 2, 0.5f, ref.Shard(dtype, true));
        k.range(scalars, got.Shard(dtype, true), 0, split);
        k.range(scalars, got.Shard(dtype, true), split, n);
        EXPECT_TRUE(BitEqual(ref.master, got.master)) << k.name << " split " << split;
        EXPECT_TRUE(BitEqual(ref.out32, got.out32)) << k.name << " split " << split;
        EXPECT_EQ(ref.out16, got.out16) << k.name << " split " << split;
      }
    }
  }
}

TEST(AdamWBf16Test, SpecialValuesRoundLikeDtypeH) {
  // Values chosen to hit ties, denormals, infinities and NaN in the bf16 path.
  std::vector<float> specials = {1.0f,     1.00390625f, 1.01171875f, -2.5f,         1e-40f, -1e-41f,
                                 INFINITY, -INFINITY,   NAN,         3.3895314e38f, 0.0f,   -0.0f};
  while (specials.size() < 40) specials.push_back(specials[specials.size() % 12] * 0.75f);
  const int64_t n = static_cast<int64_t>(specials.size());
  for (const Path& path : kPaths) {
    if (!path.supported()) continue;
    State s(n, 3);
    s.master = specials;
    std::fill(s.grad.begin(), s.grad.end(), 0.0f);
    // lr = 0, wd = 0: finite masters are unchanged (infinities become NaN
    // through 0 * inf), so the conversion itself is what is tested.
    path.run({0.0f, 0.9f, 0.999f, 1e-8f, 0.0f}, 1, 1.0f, s.Shard(DType::kBf16, true));
    for (int64_t i = 0; i < n; ++i) {
      if (std::isfinite(specials[i])) {
        ASSERT_EQ(s.master[i], specials[i]) << i;
      }
      ASSERT_EQ(s.out16[i], FloatToBf16(s.master[i])) << path.name << " element " << i;
    }
  }
}

TEST(SumSquaresTest, MatchesDoubleSum) {
  for (int64_t n : {0, 1, 7, 1000, 10007, 300007}) {
    State s(n, 11);
    double want = 0.0;
    for (float g : s.grad) want += static_cast<double>(g) * g;
    EXPECT_NEAR(SumSquaresCpu(s.grad.data(), n, 3), want, 1e-12 * (1.0 + want)) << n;
    EXPECT_NEAR(SumSquaresCpu(s.grad.data(), n, 1), want, 1e-12 * (1.0 + want)) << n;
  }
}

}  // namespace
}  // namespace zeroshard
