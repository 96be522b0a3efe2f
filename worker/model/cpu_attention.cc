// Causal multi-head self-attention on the CPU (Vaswani et al., 2017, with
// GPT-2's causal mask).
//
// How it works: for each (batch b, head h) pair independently, with head
// size hs = C / NH and q, k, v the head's slices of qkv[b, t, :]:
//   forward:  s[t, u] = q[t] . k[u] / sqrt(hs) for u <= t; att[t, :] =
//             softmax(s[t, :]) over u <= t (0 above the diagonal);
//             out[t] = sum_u att[t, u] v[u].
//   backward: datt[t, u] = dout[t] . v[u]; dv[u] += att[t, u] dout[t];
//             ds[t, u] = att[t, u] (datt[t, u] - sum_j att[t, j] datt[t, j]);
//             dq[t] += ds[t, u] k[u] / sqrt(hs); dk[u] += ds[t, u] q[t] / sqrt(hs).
// The scores s[t, :] and datt[t, :] of a row are computed against the pair's
// k (v) transposed once into scratch, so their loops run over u in full
// vectors; the sums over u run over i (hs) in vectors.
// A (b, h) pair reads and writes only its own channels of qkv/dqkv/out and
// its own att[b, h] block, so pairs run on separate threads without locks.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "worker/model/cpu_kernels_internal.h"
#include "worker/model/cpu_simd.h"
#include "worker/model/fast_math.h"
#include "common/parallel_for.h"
#include "worker/model/kernels.h"

namespace zeroshard {

namespace {

// Register blocking: sums that run over rows (over i for the scores, over u
// for the outputs) are kept in a block of kLanes accumulators, one AVX-512
// vector, so each row costs one FMA per block and no store/load round trip
// through memory (which made the plain loops latency-bound).
constexpr int kLanes = 16;

int RoundUpToLanes(int n) { return (n + kLanes - 1) / kLanes * kLanes; }

// mt[i * Tp + u] = m[u * row + i] for i < hs, u < T, and 0 for T <= u < Tp:
// one head's k (or v) transposed, so a query row's scores are contiguous in
// u and whole blocks of kLanes can be read.
ZS_SIMD_CLONES void TransposeHead(const float* m, int64_t row, int T, int hs, float* mt) {
  const int Tp = RoundUpToLanes(T);
  for (int i = 0; i < hs; ++i) {
    float* out = mt + int64_t{i} * Tp;
    for (int u = 0; u < T; ++u) out[u] = m[u * row + i];
    for (int u = T; u < Tp; ++u) out[u] = 0.0f;
  }
}

// Helpers forced inline into the cloned pair functions below, so they are
// compiled for each clone's instruction set (a function left out of line
// is compiled for the baseline only). Lanes is one AVX-512 vector (two AVX2,
// four SSE vectors in the other clones); Lanes are never passed or returned
// by value, which would change the calling convention between the clones.
typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float))));

// acc += w * p[0, kLanes), p unaligned.
ZS_ALWAYS_INLINE void AddScaledLanes(float w, const float* p, Lanes& acc) {
  Lanes v;
  std::memcpy(&v, p, sizeof(v));
  acc += w * v;
}

// y[j] = sum_{r < rows} w[r] * m[r * ld + j] for j < kBlocks * kLanes
// (writes). Even and odd rows go to separate accumulators, so 2 * kBlocks
// FMA chains run at once instead of one waiting on the previous FMA.
template <int kBlocks>
ZS_ALWAYS_INLINE void WeightedRowsBlocks(const float* w, const float* m, int64_t ld, int rows,
                                         float* y) {
  Lanes even[kBlocks] = {}, odd[kBlocks] = {};
  int r = 0;
  for (; r + 1 < rows; r += 2) {
    const float* m0 = m + r * ld;
    const float* m1 = m0 + ld;
    for (int b = 0; b < kBlocks; ++b) {
      AddScaledLanes(w[r], m0 + b * kLanes, even[b]);
      AddScaledLanes(w[r + 1], m1 + b * kLanes, odd[b]);
    }
  }
  for (; r < rows; ++r) {
    for (int b = 0; b < kBlocks; ++b) AddScaledLanes(w[r], m + r * ld + b * kLanes, even[b]);
  }
  for (int b = 0; b < kBlocks; ++b) {
    const Lanes sum = even[b] + odd[b];
    std::memcpy(y + b * kLanes, &sum, sizeof(sum));
  }
}

// y[j] = sum_{r < rows} w[r] * m[r * ld + j] for j < width (writes): pairs
// of blocks, a last block, then the columns past the last block.
ZS_ALWAYS_INLINE void WeightedRows(const float* w, const float* m, int64_t ld, int rows,
                                   int width, float* y) {
  int j0 = 0;
  for (; j0 + 2 * kLanes <= width; j0 += 2 * kLanes) {
    WeightedRowsBlocks<2>(w, m + j0, ld, rows, y + j0);
  }
  for (; j0 + kLanes <= width; j0 += kLanes) WeightedRowsBlocks<1>(w, m + j0, ld, rows, y + j0);
  for (int j = j0; j < width; ++j) {
    float acc = 0.0f;
    for (int r = 0; r < rows; ++r) acc += w[r] * m[r * ld + j];
    y[j] = acc;
  }
}

// y[i] += alpha * x[i], i < n.
ZS_ALWAYS_INLINE void Axpy(float alpha, const float* __restrict x, int n, float* __restrict y) {
  for (int i = 0; i < n; ++i) y[i] += alpha * x[i];
}

// The scratch of one thread: kt/vt hs x Tp, q and acc hs, scores Tp.
struct PairScratch {
  PairScratch(int T, int hs)
      : mt(static_cast<size_t>(hs) * RoundUpToLanes(T)),
        q(hs),
        acc(hs),
        scores(RoundUpToLanes(T)) {}
  std::vector<float> mt, q, acc, scores;
};

// One (b, h) pair's forward: `base` points at head h's q of token 0 (k and
// v follow at +C and +2C in each row of `row` floats), att_bh at its T x T
// block, out_bh at head h's slice of token 0's output (rows of C floats).
ZS_SIMD_CLONES void PairForward(const float* base, int64_t row, int T, int C, int hs,
                                float scale, float* att_bh, float* out_bh, PairScratch& w) {
  const int Tp = RoundUpToLanes(T);
  TransposeHead(base + C, row, T, hs, w.mt.data());
  for (int t = 0; t < T; ++t) {
    const int n = t + 1;
    float* a = att_bh + int64_t{t} * T;
    for (int i = 0; i < hs; ++i) w.q[i] = base[t * row + i] * scale;
    WeightedRows(w.q.data(), w.mt.data(), Tp, hs, RoundUpToLanes(n), w.scores.data());
    float mx = -INFINITY;
    for (int u = 0; u < n; ++u) mx = std::max(mx, w.scores[u]);
    float sum = 0.0f;
    for (int u = 0; u < n; ++u) {
      a[u] = FastExp(w.scores[u] - mx);
      sum += a[u];
    }
    const float inv = 1.0f / sum;
    for (int u = 0; u < n; ++u) a[u] *= inv;
    for (int u = n; u < T; ++u) a[u] = 0.0f;
    WeightedRows(a, base + 2 * C, row, n, hs, out_bh + int64_t{t} * C);  // sum_u a[u] v[u]
  }
}

// One (b, h) pair's backward; dbase is base's twin in dqkv, dout_bh head
// h's slice of token 0's output gradient.
ZS_SIMD_CLONES void PairBackward(const float* base, float* dbase, const float* dout_bh,
                                 const float* att_bh, int64_t row, int T, int C, int hs,
                                 float scale, PairScratch& w) {
  const int Tp = RoundUpToLanes(T);
  TransposeHead(base + 2 * C, row, T, hs, w.mt.data());
  float* ds = w.scores.data();
  for (int t = 0; t < T; ++t) {
    const int n = t + 1;
    const float* a = att_bh + int64_t{t} * T;
    const float* dy = dout_bh + int64_t{t} * C;
    WeightedRows(dy, w.mt.data(), Tp, hs, RoundUpToLanes(n), ds);  // datt[u] = dy . v[u]
    float dot = 0.0f;
    for (int u = 0; u < n; ++u) dot += a[u] * ds[u];
    for (int u = 0; u < n; ++u) ds[u] = a[u] * (ds[u] - dot) * scale;
    const float* q = base + t * row;
    WeightedRows(ds, base + C, row, n, hs, w.acc.data());  // sum_u ds[u] k[u]
    Axpy(1.0f, w.acc.data(), hs, dbase + t * row);         // dq[t]
    for (int u = 0; u < n; ++u) {
      Axpy(a[u], dy, hs, dbase + u * row + 2 * C);  // dv[u]
      Axpy(ds[u], q, hs, dbase + u * row + C);       // dk[u]
    }
  }
}

// fn(b, h, bh, row, hs, scale, scratch) for every (batch b, head h) pair,
// bh = b * NH + h, split over the compute threads, one scratch a thread.
template <typename Fn>
void ForEachPair(int B, int T, int C, int NH, Fn&& fn) {
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int64_t row = 3 * int64_t{C};
  ParallelFor(int64_t{B} * NH, ComputeThreads(), 1, 1, [&](int, int64_t begin, int64_t end) {
    PairScratch scratch(T, hs);
    for (int64_t bh = begin; bh < end; ++bh) fn(bh / NH, bh % NH, bh, row, hs, scale, scratch);
  });
}

}  // namespace

void CpuAttentionForward(const float* qkv, int B, int T, int C, int NH, float* out,
                         float* att) {
  ForEachPair(B, T, C, NH, [&](int64_t b, int64_t h, int64_t bh, int64_t row, int hs,
                               float scale, PairScratch& scratch) {
    PairForward(qkv + b * T * row + h * hs, row, T, C, hs, scale, att + bh * T * T,
                out + b * T * int64_t{C} + h * hs, scratch);
  });
}

void CpuAttentionBackward(const float* dout, const float* qkv, const float* att, int B,
                          int T, int C, int NH, float* dqkv) {
  ForEachPair(B, T, C, NH, [&](int64_t b, int64_t h, int64_t bh, int64_t row, int hs,
                               float scale, PairScratch& scratch) {
    PairBackward(qkv + b * T * row + h * hs, dqkv + b * T * row + h * hs,
                 dout + b * T * int64_t{C} + h * hs, att + bh * T * T, row, T, C, hs, scale,
                 scratch);
  });
}

}  // namespace zeroshard
