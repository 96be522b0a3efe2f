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
// A (b, h) pair reads and writes only its own channels of qkv/dqkv/out and
// its own att[b, h] block, so pairs run on separate threads without locks.
#include <algorithm>
#include <cmath>
#include <vector>

#include "worker/model/cpu_kernels_internal.h"
#include "worker/model/fast_math.h"
#include "common/parallel_for.h"
#include "worker/model/kernels.h"

namespace zeroshard {

void CpuAttentionForward(const float* qkv, int B, int T, int C, int NH, float* out,
                         float* att) {
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int64_t row = 3 * int64_t{C};
  ParallelFor(int64_t{B} * NH, ComputeThreads(), 1, 1, [&](int, int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / NH, h = bh % NH;
      const float* base = qkv + b * T * row + h * hs;
      float* att_bh = att + bh * T * T;
      for (int t = 0; t < T; ++t) {
        const float* q = base + t * row;
        float* a = att_bh + int64_t{t} * T;
        float mx = -INFINITY;
        for (int u = 0; u <= t; ++u) {
          const float* k = base + u * row + C;
          float s = 0.0f;
          for (int i = 0; i < hs; ++i) s += q[i] * k[i];
          a[u] = s * scale;
          mx = std::max(mx, a[u]);
        }
        float sum = 0.0f;
        for (int u = 0; u <= t; ++u) {
          a[u] = FastExp(a[u] - mx);
          sum += a[u];
        }
        const float inv = 1.0f / sum;
        for (int u = 0; u <= t; ++u) a[u] *= inv;
        for (int u = t + 1; u < T; ++u) a[u] = 0.0f;
        float* o = out + (b * T + t) * int64_t{C} + h * hs;
        for (int i = 0; i < hs; ++i) o[i] = 0.0f;
        for (int u = 0; u <= t; ++u) {
          const float* v = base + u * row + 2 * C;
          const float w = a[u];
          for (int i = 0; i < hs; ++i) o[i] += w * v[i];
        }
      }
    }
  });
}

void CpuAttentionBackward(const float* dout, const float* qkv, const float* att, int B,
                          int T, int C, int NH, float* dqkv) {
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int64_t row = 3 * int64_t{C};
  ParallelFor(int64_t{B} * NH, ComputeThreads(), 1, 1, [&](int, int64_t begin, int64_t end) {
    std::vector<float> datt(T);
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / NH, h = bh % NH;
      const float* base = qkv + b * T * row + h * hs;
      float* dbase = dqkv + b * T * row + h * hs;
      const float* att_bh = att + bh * T * T;
      for (int t = 0; t < T; ++t) {
        const float* a = att_bh + int64_t{t} * T;
        const float* dy = dout + (b * T + t) * int64_t{C} + h * hs;
        float dot = 0.0f;
        for (int u = 0; u <= t; ++u) {
          const float* v = base + u * row + 2 * C;
          float* dv = dbase + u * row + 2 * C;
          float s = 0.0f;
          for (int i = 0; i < hs; ++i) {
            s += dy[i] * v[i];
            dv[i] += a[u] * dy[i];
          }
          datt[u] = s;
          dot += a[u] * s;
        }
        const float* q = base + t * row;
        float* dq = dbase + t * row;
        for (int u = 0; u <= t; ++u) {
          const float ds = a[u] * (datt[u] - dot) * scale;
          const float* k = base + u * row + C;
          float* dk = dbase + u * row + C;
          for (int i = 0; i < hs; ++i) {
            dq[i] += ds * k[i];
            dk[i] += ds * q[i];
          }
        }
      }
    }
  });
}

}  // namespace zeroshard
