// The Llama family's CPU kernels (cpu_llama_kernels.cc, through
// CpuKernels()) against references written here in double precision, at
// odd sizes (STYLE.md point 15).
//
// Error measure: max_i |got_i - want_i| / max_i |want_i| over a tensor.
// Forwards must match the double formulas within kForward (float rounding
// of a few operations per element); backwards must match both the double
// formulas (kForward) and central differences of the double forward
// (kFiniteDifference): L = sum(out * r) for a random r, whose gradient is
// the backward with dout = r. The differences use step 1e-4 in double, so
// their own error (~1e-8) is far below the tolerance.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "worker/model/kernels.h"

namespace zeroshard {
namespace {

constexpr double kForward = 1e-5;
constexpr double kFiniteDifference = 1e-3;
constexpr float kEps = 1e-6f;  // Llama's RMSNorm epsilon.

using Doubles = std::vector<double>;

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

Doubles ToDoubles(const std::vector<float>& v) { return Doubles(v.begin(), v.end()); }

double Dot(const Doubles& a, const Doubles& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// The error measure of the header comment; +inf on a size mismatch or NaN.
double RelativeError(const std::vector<float>& got, const Doubles& want) {
  if (got.size() != want.size()) return INFINITY;
  double err = 0.0, scale = 1e-30;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    err = std::max(err, std::abs(got[i] - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  return err / scale;
}

// start + dL/dx by central differences, x perturbed in place and restored.
Doubles PlusNumericGradient(const std::vector<float>& start, Doubles& x,
                            const std::function<double()>& loss) {
  const double h = 1e-4;
  Doubles g(start.begin(), start.end());
  for (size_t i = 0; i < x.size(); ++i) {
    const double old = x[i];
    x[i] = old + h;
    const double lp = loss();
    x[i] = old - h;
    const double lm = loss();
    x[i] = old;
    g[i] += (lp - lm) / (2 * h);
  }
  return g;
}

Kernels& K() { return CpuKernels(); }

// ---- RMSNorm ------------------------------------------------------------

// out = x * rstd * w per row, rstd = 1 / sqrt(mean_c x^2 + eps).
Doubles RmsNormRef(const Doubles& x, const Doubles& w, int N, int C, Doubles* rstd = nullptr) {
  Doubles out(x.size());
  for (int n = 0; n < N; ++n) {
    const double* xr = &x[int64_t{n} * C];
    double sq = 0.0;
    for (int c = 0; c < C; ++c) sq += xr[c] * xr[c];
    const double s = 1.0 / std::sqrt(sq / C + kEps);
    for (int c = 0; c < C; ++c) out[int64_t{n} * C + c] = xr[c] * s * w[c];
    if (rstd != nullptr) rstd->push_back(s);
  }
  return out;
}

// dx0 + dx and dw0 + dw by kernels.h's formulas.
void RmsNormBackwardRef(const Doubles& dout, const Doubles& x, const Doubles& w, int N, int C,
                        Doubles& dx, Doubles& dw) {
  Doubles rstd;
  RmsNormRef(x, w, N, C, &rstd);
  for (int n = 0; n < N; ++n) {
    const int64_t row = int64_t{n} * C;
    double mean_dn_xhat = 0.0;
    for (int c = 0; c < C; ++c) mean_dn_xhat += dout[row + c] * w[c] * x[row + c] * rstd[n] / C;
    for (int c = 0; c < C; ++c) {
      const double xhat = x[row + c] * rstd[n];
      dx[row + c] += rstd[n] * (dout[row + c] * w[c] - xhat * mean_dn_xhat);
      dw[c] += dout[row + c] * xhat;
    }
  }
}

TEST(LlamaKernelsTest, RmsNormMatchesDoubleAndFiniteDifferences) {
  for (const auto& [N, C] : std::vector<std::tuple<int, int>>{{37, 73}, {1, 8}, {5, 257}}) {
    const int64_t NC = int64_t{N} * C;
    const std::vector<float> x = Random(NC, 1, 2.0f), w = Random(C, 2), r = Random(NC, 3);
    const std::vector<float> dx0 = Random(NC, 4), dw0 = Random(C, 5);
    std::vector<float> out(NC), rstd(N), dx = dx0, dw = dw0;
    K().RmsNormForward(x.data(), w.data(), N, C, kEps, out.data(), rstd.data());
    K().RmsNormBackward(r.data(), x.data(), w.data(), rstd.data(), N, C, dx.data(), dw.data());
    Doubles xd = ToDoubles(x), wd = ToDoubles(w), want_rstd;
    const Doubles rd = ToDoubles(r);
    EXPECT_LE(RelativeError(out, RmsNormRef(xd, wd, N, C, &want_rstd)), kForward) << N << "x" << C;
    EXPECT_LE(RelativeError(rstd, want_rstd), kForward) << N << "x" << C;
    Doubles want_dx = ToDoubles(dx0), want_dw = ToDoubles(dw0);
    RmsNormBackwardRef(rd, xd, wd, N, C, want_dx, want_dw);
    EXPECT_LE(RelativeError(dx, want_dx), kForward) << N << "x" << C;
    EXPECT_LE(RelativeError(dw, want_dw), kForward) << N << "x" << C;
    const std::function<double()> loss = [&] { return Dot(RmsNormRef(xd, wd, N, C), rd); };
    EXPECT_LE(RelativeError(dx, PlusNumericGradient(dx0, xd, loss)), kFiniteDifference) << "dx";
    EXPECT_LE(RelativeError(dw, PlusNumericGradient(dw0, wd, loss)), kFiniteDifference) << "dw";
  }
}

// ---- Rotary embedding ---------------------------------------------------

TEST(LlamaKernelsTest, RopeMatchesTheFormulaAndInverts) {
  const int B = 3, T = 7;
  for (const auto& [H, D] : std::vector<std::tuple<int, int>>{{6, 12}, {2, 12}, {1, 2}}) {
    const int half = D / 2;
    // Any angles will do for the formula; these are HF's (theta 10000).
    std::vector<float> cos(int64_t{T} * half), sin(cos.size());
    for (int t = 0; t < T; ++t) {
      for (int i = 0; i < half; ++i) {
        const double angle = t * std::pow(10000.0, -2.0 * i / D);
        cos[t * half + i] = static_cast<float>(std::cos(angle));
        sin[t * half + i] = static_cast<float>(std::sin(angle));
      }
    }
    const std::vector<float> x0 = Random(int64_t{B} * T * H * D, 6, 2.0f);
    Doubles want(x0.size());
    for (int64_t row = 0; row < int64_t{B} * T * H; ++row) {
      const int64_t t = row / H % T;
      for (int i = 0; i < half; ++i) {
        const double a = x0[row * D + i], b = x0[row * D + i + half];
        const double c = cos[t * half + i], s = sin[t * half + i];
        want[row * D + i] = a * c - b * s;
        want[row * D + i + half] = b * c + a * s;
      }
    }
    std::vector<float> x = x0;
    K().Rope(x.data(), B, T, H, D, cos.data(), sin.data(), /*inverse=*/false);
    EXPECT_LE(RelativeError(x, want), kForward) << "H=" << H << " D=" << D;
    K().Rope(x.data(), B, T, H, D, cos.data(), sin.data(), /*inverse=*/true);
    EXPECT_LE(RelativeError(x, ToDoubles(x0)), 1e-6) << "H=" << H << " D=" << D;
  }
}

// ---- SwiGLU -------------------------------------------------------------

Doubles SwigluRef(const Doubles& gu, int N, int I) {
  Doubles out(int64_t{N} * I);
  for (int64_t n = 0; n < N; ++n) {
    for (int i = 0; i < I; ++i) {
      const double g = gu[n * 2 * I + i], u = gu[n * 2 * I + I + i];
      out[n * I + i] = g / (1.0 + std::exp(-g)) * u;
    }
  }
  return out;
}

TEST(LlamaKernelsTest, SwigluMatchesDoubleAndFiniteDifferences) {
  for (const auto& [N, I] : std::vector<std::tuple<int, int>>{{37, 53}, {1, 1}, {3, 17}}) {
    const int64_t NI = int64_t{N} * I;
    const std::vector<float> gu = Random(2 * NI, 7, 3.0f), r = Random(NI, 8);
    std::vector<float> out = Random(NI, 9), dgu = Random(2 * NI, 10);  // Both written.
    K().SwigluForward(gu.data(), N, I, out.data());
    K().SwigluBackward(gu.data(), r.data(), N, I, dgu.data());
    Doubles gud = ToDoubles(gu);
    const Doubles rd = ToDoubles(r);
    EXPECT_LE(RelativeError(out, SwigluRef(gud, N, I)), kForward) << "N=" << N << " I=" << I;
    const std::function<double()> loss = [&] { return Dot(SwigluRef(gud, N, I), rd); };
    const std::vector<float> zeros(gu.size());
    EXPECT_LE(RelativeError(dgu, PlusNumericGradient(zeros, gud, loss)), kFiniteDifference)
        << "N=" << N << " I=" << I;
  }
}

// ---- Grouped-query packing ----------------------------------------------

TEST(LlamaKernelsTest, PackQkvAndItsAdjoint) {
  const int N = 37;
  for (const auto& [NH, KV, D] :
       std::vector<std::tuple<int, int, int>>{{6, 2, 12}, {6, 6, 12}, {5, 1, 3}}) {
    const int group = NH / KV;
    const int64_t C = int64_t{NH} * D, q_n = N * C, kv_n = int64_t{N} * KV * D;
    const std::vector<float> q = Random(q_n, 11), k = Random(kv_n, 12), v = Random(kv_n, 13);
    const std::vector<float> d = Random(3 * q_n, 14);
    std::vector<float> qkv = Random(3 * q_n, 15), dq = Random(q_n, 16);
    std::vector<float> dk = Random(kv_n, 17), dv = Random(kv_n, 18);  // All written.
    K().PackQkv(q.data(), k.data(), v.data(), N, NH, KV, D, qkv.data());
    K().UnpackQkvGrad(d.data(), N, NH, KV, D, dq.data(), dk.data(), dv.data());
    Doubles want_qkv(qkv.size()), want_dq(q_n), want_dk(kv_n), want_dv(kv_n);
    for (int64_t n = 0; n < N; ++n) {
      for (int h = 0; h < NH; ++h) {
        for (int i = 0; i < D; ++i) {
          const int64_t at = h * D + i, kv_at = (n * KV + h / group) * D + i;
          want_qkv[n * 3 * C + at] = q[n * C + at];
          want_qkv[n * 3 * C + C + at] = k[kv_at];
          want_qkv[n * 3 * C + 2 * C + at] = v[kv_at];
          want_dq[n * C + at] = d[n * 3 * C + at];
          want_dk[kv_at] += d[n * 3 * C + C + at];
          want_dv[kv_at] += d[n * 3 * C + 2 * C + at];
        }
      }
    }
    const ::testing::Message shape = ::testing::Message()
                                     << "NH=" << NH << " KV=" << KV << " D=" << D;
    EXPECT_EQ(RelativeError(qkv, want_qkv), 0.0) << shape;  // Copies.
    EXPECT_EQ(RelativeError(dq, want_dq), 0.0) << shape;
    EXPECT_LE(RelativeError(dk, want_dk), 1e-6) << shape;
    EXPECT_LE(RelativeError(dv, want_dv), 1e-6) << shape;
    // Unpack is Pack's adjoint: <Pack(q,k,v), d> = <q,dq> + <k,dk> + <v,dv>.
    const double lhs = Dot(ToDoubles(qkv), ToDoubles(d));
    const double rhs = Dot(ToDoubles(q), ToDoubles(dq)) + Dot(ToDoubles(k), ToDoubles(dk)) +
                       Dot(ToDoubles(v), ToDoubles(dv));
    double scale = 0.0;  // Float rounding of dk and dv is relative to the terms' sizes.
    for (size_t i = 0; i < d.size(); ++i) scale += std::abs(double{qkv[i]} * d[i]);
    EXPECT_NEAR(lhs, rhs, 1e-6 * scale) << shape;
  }
}

// ---- Embedding without positions -----------------------------------------

TEST(LlamaKernelsTest, EmbeddingWithoutPositionEmbedding) {
  const int B = 3, T = 7, C = 19, V = 11;
  const int64_t BT = int64_t{B} * T;
  std::vector<int32_t> tokens(BT);
  for (int64_t n = 0; n < BT; ++n) tokens[n] = static_cast<int32_t>((n * 7 + 3) % V);
  const std::vector<float> wte = Random(int64_t{V} * C, 19), dout = Random(BT * C, 20);
  const std::vector<float> dwte0 = Random(int64_t{V} * C, 21);
  std::vector<float> out = Random(BT * C, 22), dwte = dwte0;
  K().EmbeddingForward(tokens.data(), wte.data(), /*wpe=*/nullptr, B, T, C, out.data());
  K().EmbeddingBackward(dout.data(), tokens.data(), B, T, C, dwte.data(), /*dwpe=*/nullptr);
  Doubles want_out(out.size()), want_dwte = ToDoubles(dwte0);
  for (int64_t n = 0; n < BT; ++n) {
    for (int c = 0; c < C; ++c) {
      want_out[n * C + c] = wte[tokens[n] * C + c];
      want_dwte[tokens[n] * C + c] += dout[n * C + c];
    }
  }
  EXPECT_EQ(RelativeError(out, want_out), 0.0);  // The wte rows, copied.
  EXPECT_LE(RelativeError(dwte, want_dwte), 1e-6);
}

}  // namespace
}  // namespace zeroshard
