// Causal multi-head self-attention on the CPU (Vaswani et al., 2017, with
// GPT-2's causal mask).
//
// How it works: for each (batch b, head h) pair independently, with head
// size hs = C / NH and Q, K, V the head's [T, hs] slices of qkv[b, :, :]
// (rows 3C floats apart):
//   forward:  S = Q K^T / sqrt(hs); att = softmax of each row t over u <= t
//             (0 above the diagonal); out = att V.
//   backward: dAtt = dout V^T; dV += att^T dout;
//             dS[t, u] = att[t, u] (dAtt[t, u] - sum_j att[t, j] dAtt[t, j]) /
//             sqrt(hs); dQ += dS K; dK += dS^T Q.
// The six products are sgemm calls on the strided slices (CpuSgemm, as the
// linear layers'), over the full T x T square: the masked half costs flops
// but a GEMM's rate (~7 us a product at T = 128, hs = 32 here) beats a
// triangular row-by-row loop, which was latency- and load-bound. The masked
// entries of att and dS are exact zeros, so they add nothing.
// A (b, h) pair reads and writes only its own channels of qkv/dqkv/out and
// its own att[b, h] block, so pairs run on separate threads without locks;
// each pair's sgemm calls run on its thread alone (ScopedSgemmThreads).
#include <algorithm>
#include <cmath>
#include <memory>

#include "common/parallel_for.h"
#include "worker/model/cpu_kernels_internal.h"
#include "worker/model/cpu_row_math.h"
#include "worker/model/cpu_simd.h"
#include "worker/model/kernels.h"

namespace zeroshard {

namespace {

// Row t of the T x T block s (scores in, probabilities out): softmax over
// u <= t, zeros above the diagonal.
ZS_SIMD_CLONES void CausalSoftmaxRows(float* s, int T) {
  for (int t = 0; t < T; ++t) {
    float* a = s + int64_t{t} * T;
    const int n = t + 1;
    float sum;
    SoftmaxRow(a, n, a, &sum);
    for (int u = n; u < T; ++u) a[u] = 0.0f;
  }
}

// ds (dAtt in, dS out) = att * (dAtt - rowsum(att * dAtt)) * scale over
// u <= t, zeros above the diagonal (whatever dAtt held there).
ZS_SIMD_CLONES void CausalSoftmaxBackwardRows(const float* att, float* ds, int T, float scale) {
  for (int t = 0; t < T; ++t) {
    const float* a = att + int64_t{t} * T;
    float* d = ds + int64_t{t} * T;
    const int n = t + 1;
    const float dot = RowDot(a, d, n);
    for (int u = 0; u < n; ++u) d[u] = a[u] * (d[u] - dot) * scale;
    for (int u = n; u < T; ++u) d[u] = 0.0f;
  }
}

// One (b, h) pair's forward: `q` points at head h's q of token 0 (k and v
// at +C and +2C in each row of `row` floats), att_bh at its T x T block,
// out_bh at head h's slice of token 0's output (rows of C floats).
void PairForward(const float* q, int row, int T, int C, int hs, float scale, float* att_bh,
                 float* out_bh) {
  // S = scale Q K^T, then att = causal softmax of S, then out = att V.
  CpuSgemm(false, true, T, T, hs, scale, q, row, q + C, row, 0.0f, att_bh, T);
  CausalSoftmaxRows(att_bh, T);
  CpuSgemm(false, false, T, hs, T, 1.0f, att_bh, T, q + 2 * C, row, 0.0f, out_bh, C);
}

// One (b, h) pair's backward; dq is q's twin in dqkv, dout_bh head h's slice
// of token 0's output gradient, ds a T x T scratch.
void PairBackward(const float* q, float* dq, const float* dout_bh, const float* att_bh, int row,
                  int T, int C, int hs, float scale, float* ds) {
  // dAtt = dout V^T (into ds); dV += att^T dout.
  CpuSgemm(false, true, T, T, hs, 1.0f, dout_bh, C, q + 2 * C, row, 0.0f, ds, T);
  CpuSgemm(true, false, T, hs, T, 1.0f, att_bh, T, dout_bh, C, 1.0f, dq + 2 * C, row);
  // ds becomes dS; then dQ += dS K and dK += dS^T Q.
  CausalSoftmaxBackwardRows(att_bh, ds, T, scale);
  CpuSgemm(false, false, T, hs, T, 1.0f, ds, T, q + C, row, 1.0f, dq, row);
  CpuSgemm(true, false, T, hs, T, 1.0f, ds, T, q, row, 1.0f, dq + C, row);
}

// fn(b, h, bh, row, hs, scale, ds) for every (batch b, head h) pair,
// bh = b * NH + h, split over the compute threads; ds is a T x T scratch of
// the thread's (uninitialised) when `scratch`, else null.
template <typename Fn>
void ForEachPair(int B, int T, int C, int NH, bool scratch, Fn&& fn) {
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int row = 3 * C;
  ParallelFor(int64_t{B} * NH, ComputeThreads(), 1, 1, [&](int, int64_t begin, int64_t end) {
    ScopedSgemmThreads alone(1);  // Same bits whatever the thread count.
    std::unique_ptr<float[]> ds(scratch ? new float[static_cast<size_t>(T) * T] : nullptr);
    for (int64_t bh = begin; bh < end; ++bh) fn(bh / NH, bh % NH, bh, row, hs, scale, ds.get());
  });
}

}  // namespace

void CpuAttentionForward(const float* qkv, int B, int T, int C, int NH, float* out, float* att) {
  ForEachPair(B, T, C, NH, /*scratch=*/false,
              [&](int64_t b, int64_t h, int64_t bh, int row, int hs, float scale, float*) {
                PairForward(qkv + b * T * row + h * hs, row, T, C, hs, scale, att + bh * T * T,
                            out + b * T * int64_t{C} + h * hs);
              });
}

void CpuAttentionBackward(const float* dout, const float* qkv, const float* att, int B, int T,
                          int C, int NH, float* dqkv) {
  ForEachPair(B, T, C, NH, /*scratch=*/true,
              [&](int64_t b, int64_t h, int64_t bh, int row, int hs, float scale, float* ds) {
                PairBackward(qkv + b * T * row + h * hs, dqkv + b * T * row + h * hs,
                             dout + b * T * int64_t{C} + h * hs, att + bh * T * T, row, T, C, hs,
                             scale, ds);
              });
}

}  // namespace zeroshard
