// Every CPU kernel's backward against central finite differences of its own
// forward, and Matmul against a naive triple loop.
//
// How: pick random inputs x and a random projection w, let L(x) = sum(w *
// forward(x)) accumulated in double; the backward with dout = w must equal
// dL/dx. Finite differences run the float32 forward with step h = 1e-2 (a
// smooth function, so truncation error ~h^2), hence the tolerance of
// 2e-3 absolute + 1e-2 relative (float32 rounding of L over ~100 terms,
// divided by 2h).
#include "worker/model/kernels.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "worker/model/fast_math.h"

namespace zeroshard {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += double{a[i]} * b[i];
  return s;
}

// Compares analytic[i] with (L(x+h e_i) - L(x-h e_i)) / 2h for every i.
void ExpectGradient(const char* what, std::vector<float>& x, const std::vector<float>& analytic,
                    const std::function<double()>& loss, float h = 1e-2f) {
  ASSERT_EQ(x.size(), analytic.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float old = x[i];
    x[i] = old + h;
    const double lp = loss();
    x[i] = old - h;
    const double lm = loss();
    x[i] = old;
    const double fd = (lp - lm) / (2.0 * h);
    ASSERT_NEAR(analytic[i], fd, 2e-3 + 1e-2 * std::abs(fd)) << what << "[" << i << "]";
  }
}

Kernels& K() { return CpuKernels(); }

TEST(KernelsTest, MatmulMatchesNaiveForEveryTranspose) {
  const int M = 5, N = 7, Kd = 3;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      std::vector<float> A = Random(M * Kd, 1), B = Random(Kd * N, 2), C = Random(M * N, 3);
      std::vector<float> expect(M * N);
      for (int i = 0; i < M; ++i) {
        for (int j = 0; j < N; ++j) {
          double s = 0.0;
          for (int k = 0; k < Kd; ++k) {
            const float a = ta ? A[k * M + i] : A[i * Kd + k];
            const float b = tb ? B[j * Kd + k] : B[k * N + j];
            s += double{a} * b;
          }
          expect[i * N + j] = static_cast<float>(2.0 * s + 0.5 * C[i * N + j]);
        }
      }
      K().Matmul(ta, tb, M, N, Kd, 2.0f, A.data(), B.data(), 0.5f, C.data());
      for (int i = 0; i < M * N; ++i) {
        EXPECT_NEAR(C[i], expect[i], 1e-5) << "ta=" << ta << " tb=" << tb << " i=" << i;
      }
    }
  }
}

TEST(KernelsTest, FastExpAndTanhMatchLibm) {
  double worst_exp = 0.0, worst_tanh = 0.0;
  for (float x = -87.0f; x <= 88.0f; x += 0.01f) {
    const double e = std::exp(double{x});
    worst_exp = std::max(worst_exp, std::abs(FastExp(x) - e) / e);
    worst_tanh = std::max(worst_tanh, std::abs(double{FastTanh(x / 8)} - std::tanh(double{x} / 8)));
  }
  EXPECT_LT(worst_exp, 5e-7);  // ~4 ulp.
  EXPECT_LT(worst_tanh, 5e-7);
  EXPECT_EQ(FastExp(0.0f), 1.0f);
  EXPECT_GT(FastExp(-1000.0f), 0.0f);  // Clamped, never 0 or NaN.
  EXPECT_TRUE(std::isfinite(FastExp(1000.0f)));
}

TEST(KernelsTest, BiasBackward) {
  const int N = 4, C = 5;
  std::vector<float> x = Random(N * C, 4), bias = Random(C, 5), w = Random(N * C, 6);
  std::vector<float> dbias(C, 0.0f);
  K().BiasBackward(w.data(), N, C, dbias.data());
  ExpectGradient("dbias", bias, dbias, [&] {
    std::vector<float> y = x;
    K().BiasAdd(y.data(), bias.data(), N, C);
    return Dot(y, w);
  });
}

TEST(KernelsTest, LayerNormBackward) {
  const int N = 3, C = 8;
  std::vector<float> x = Random(N * C, 7), g = Random(C, 8), b = Random(C, 9),
                     w = Random(N * C, 10);
  std::vector<float> out(N * C), mean(N), rstd(N);
  auto loss = [&] {
    K().LayerNormForward(x.data(), g.data(), b.data(), N, C, out.data(), mean.data(), rstd.data());
    return Dot(out, w);
  };
  loss();
  std::vector<float> dx(N * C, 0.0f), dg(C, 0.0f), db(C, 0.0f);
  K().LayerNormBackward(w.data(), x.data(), g.data(), mean.data(), rstd.data(), N, C, dx.data(),
                        dg.data(), db.data());
  ExpectGradient("dx", x, dx, loss);
  ExpectGradient("dgamma", g, dg, loss);
  ExpectGradient("dbeta", b, db, loss);
}

TEST(KernelsTest, GeluBackward) {
  const int n = 40;
  std::vector<float> x = Random(n, 11, 2.0f), w = Random(n, 12), out(n);
  auto loss = [&] {
    K().GeluForward(x.data(), n, out.data());
    return Dot(out, w);
  };
  std::vector<float> dx(n, 0.0f);
  K().GeluBackward(x.data(), w.data(), n, dx.data());
  ExpectGradient("dx", x, dx, loss);
  // Values from the formula 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))).
  std::vector<float> probe = {-3.0f, 0.0f, 1.0f}, y(3);
  K().GeluForward(probe.data(), 3, y.data());
  EXPECT_NEAR(y[0], -0.0036373, 1e-6);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_NEAR(y[2], 0.8411920, 1e-6);
}

TEST(KernelsTest, AttentionBackwardAndCausality) {
  const int B = 2, T = 5, C = 8, NH = 2;
  std::vector<float> qkv = Random(B * T * 3 * C, 13), w = Random(B * T * C, 14);
  std::vector<float> out(B * T * C), att(B * NH * T * T);
  auto loss = [&] {
    K().AttentionForward(qkv.data(), B, T, C, NH, out.data(), att.data());
    return Dot(out, w);
  };
  loss();
  for (int bh = 0; bh < B * NH; ++bh) {
    for (int t = 0; t < T; ++t) {
      double row = 0.0;
      for (int u = 0; u < T; ++u) {
        const float a = att[(bh * T + t) * T + u];
        if (u > t) {
          EXPECT_EQ(a, 0.0f);
        }
        row += a;
      }
      EXPECT_NEAR(row, 1.0, 1e-5);
    }
  }
  // dqkv accumulates (+=): start from other values and take them off after.
  const std::vector<float> before = Random(qkv.size(), 18);
  std::vector<float> dqkv = before;
  K().AttentionBackward(w.data(), qkv.data(), att.data(), B, T, C, NH, dqkv.data());
  for (size_t i = 0; i < dqkv.size(); ++i) dqkv[i] -= before[i];
  ExpectGradient("dqkv", qkv, dqkv, loss);
}

TEST(KernelsTest, AttentionSameOnSeveralThreads) {
  const int B = 3, T = 7, C = 12, NH = 3;
  std::vector<float> qkv = Random(B * T * 3 * C, 15), dout = Random(B * T * C, 16);
  auto run = [&](int threads, std::vector<float>& out, std::vector<float>& dqkv) {
    SetComputeThreads(threads);
    std::vector<float> att(B * NH * T * T);
    out.assign(B * T * C, 0.0f);
    dqkv.assign(qkv.size(), 0.0f);
    K().AttentionForward(qkv.data(), B, T, C, NH, out.data(), att.data());
    K().AttentionBackward(dout.data(), qkv.data(), att.data(), B, T, C, NH, dqkv.data());
  };
  std::vector<float> o1, d1, o3, d3;
  run(1, o1, d1);
  run(3, o3, d3);
  SetComputeThreads(1);
  EXPECT_EQ(o1, o3);  // Each (batch, head) pair is computed identically.
  EXPECT_EQ(d1, d3);
}

TEST(KernelsTest, SoftmaxCrossEntropyBackward) {
  const int N = 3, V = 11;
  const float scale = 0.7f;
  std::vector<float> logits = Random(N * V, 17, 3.0f), probs(N * V), losses(N);
  std::vector<int32_t> targets = {0, 10, 4};
  auto loss = [&] {
    K().SoftmaxCrossEntropyForward(logits.data(), targets.data(), N, V, probs.data(),
                                   losses.data());
    double s = 0.0;
    for (float l : losses) s += l;
    return scale * s;
  };
  loss();
  // Loss against a direct log-sum-exp in double.
  for (int n = 0; n < N; ++n) {
    double z = 0.0;
    for (int v = 0; v < V; ++v) z += std::exp(double{logits[n * V + v]});
    EXPECT_NEAR(losses[n], std::log(z) - logits[n * V + targets[n]], 1e-5);
  }
  std::vector<float> dlogits(N * V);
  K().SoftmaxCrossEntropyBackward(probs.data(), targets.data(), N, V, scale, dlogits.data());
  ExpectGradient("dlogits", logits, dlogits, loss);
}

// A row whose target is kIgnoreTarget counts for nothing: loss 0, and the
// numerical gradient of the summed loss is 0 on it (the check below).
TEST(KernelsTest, SoftmaxCrossEntropyIgnoresUncountedRows) {
  const int N = 3, V = 11;
  const float scale = 0.7f;
  std::vector<float> logits = Random(N * V, 21, 3.0f), probs(N * V), losses(N);
  std::vector<int32_t> targets = {2, kIgnoreTarget, 9};
  auto loss = [&] {
    K().SoftmaxCrossEntropyForward(logits.data(), targets.data(), N, V, probs.data(),
                                   losses.data());
    return scale * (double{losses[0]} + losses[1] + losses[2]);
  };
  loss();
  EXPECT_EQ(losses[1], 0.0f);
  std::vector<float> dlogits(N * V, 1.0f);
  K().SoftmaxCrossEntropyBackward(probs.data(), targets.data(), N, V, scale, dlogits.data());
  for (int v = 0; v < V; ++v) EXPECT_EQ(dlogits[V + v], 0.0f) << v;
  ExpectGradient("dlogits", logits, dlogits, loss);
}

TEST(KernelsTest, EmbeddingBackwardWithRepeatedTokens) {
  const int B = 2, T = 3, C = 4, V = 5;
  std::vector<int32_t> tokens = {1, 3, 1, 4, 1, 0};  // Token 1 three times.
  std::vector<float> wte = Random(V * C, 18), wpe = Random(T * C, 19), w = Random(B * T * C, 20);
  std::vector<float> out(B * T * C);
  auto loss = [&] {
    K().EmbeddingForward(tokens.data(), wte.data(), wpe.data(), B, T, C, out.data());
    return Dot(out, w);
  };
  std::vector<float> dwte(V * C, 0.0f), dwpe(T * C, 0.0f);
  K().EmbeddingBackward(w.data(), tokens.data(), B, T, C, dwte.data(), dwpe.data());
  ExpectGradient("dwte", wte, dwte, loss);
  ExpectGradient("dwpe", wpe, dwpe, loss);
}

TEST(KernelsTest, SumInDouble) {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{100003}}) {
    std::vector<float> x = Random(n, 21, 3.0f);
    long double want = 0;
    for (float v : x) want += v;
    double got = -1.0;
    K().Sum(x.data(), n, &got);
    EXPECT_NEAR(got, static_cast<double>(want),
                1e-12 * (1.0 + std::fabs(static_cast<double>(want))))
        << "n=" << n;
  }
  // fp32 would lose the 1s next to 2^25; fp64 keeps them.
  std::vector<float> big = {33554432.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  double got = 0.0;
  K().Sum(big.data(), 5, &got);
  EXPECT_EQ(got, 33554436.0);
  EXPECT_TRUE(K().TakeStatus().ok());
}

}  // namespace
}  // namespace zeroshard
