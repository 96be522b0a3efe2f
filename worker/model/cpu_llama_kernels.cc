// CPU loops of the Llama family's layers (formulas in kernels.h: RMSNorm,
// rotary embedding, SwiGLU, grouped-query packing), multi-versioned by
// instruction set (cpu_simd.h). CpuKernels() (cpu_kernels.cc) calls them.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "worker/model/cpu_kernels_internal.h"
#include "worker/model/cpu_row_math.h"
#include "worker/model/cpu_simd.h"

namespace zeroshard {

ZS_SIMD_CLONES void CpuRmsNormForward(const float* x, const float* w, int N, int C, float eps,
                                      float* out, float* rstd) {
  for (int n = 0; n < N; ++n) {
    const float* xr = x + int64_t{n} * C;
    float* yr = out + int64_t{n} * C;
    const float s = 1.0f / std::sqrt(RowDot(xr, xr, C) / static_cast<float>(C) + eps);
    for (int c = 0; c < C; ++c) yr[c] = xr[c] * s * w[c];
    rstd[n] = s;
  }
}

ZS_SIMD_CLONES void CpuRmsNormBackward(const float* dout, const float* x, const float* w,
                                       const float* rstd, int N, int C, float* dx, float* dw) {
  for (int n = 0; n < N; ++n) {
    const float* dy = dout + int64_t{n} * C;
    const float* xr = x + int64_t{n} * C;
    float* dxr = dx + int64_t{n} * C;
    const float s = rstd[n];
    float mean_dn_xhat = 0.0f;
    for (int c = 0; c < C; ++c) {
      const float xhat = xr[c] * s;
      mean_dn_xhat += dy[c] * w[c] * xhat;
      dw[c] += dy[c] * xhat;
    }
    mean_dn_xhat /= static_cast<float>(C);
    for (int c = 0; c < C; ++c) dxr[c] += s * (dy[c] * w[c] - xr[c] * s * mean_dn_xhat);
  }
}

ZS_SIMD_CLONES void CpuRope(float* x, int B, int T, int H, int D, const float* cos,
                            const float* sin, bool inverse) {
  const int half = D / 2;
  const float sign = inverse ? -1.0f : 1.0f;
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const float* c = cos + int64_t{t} * half;
      const float* s = sin + int64_t{t} * half;
      for (int h = 0; h < H; ++h) {
        float* x1 = x + ((int64_t{b} * T + t) * H + h) * D;
        float* x2 = x1 + half;
        for (int i = 0; i < half; ++i) {
          const float a = x1[i], bb = x2[i], si = sign * s[i];
          x1[i] = a * c[i] - bb * si;
          x2[i] = bb * c[i] + a * si;
        }
      }
    }
  }
}

ZS_SIMD_CLONES void CpuSwigluForward(const float* gu, int N, int I, float* out) {
  for (int n = 0; n < N; ++n) {
    const float* g = gu + int64_t{n} * 2 * I;
    const float* u = g + I;
    float* o = out + int64_t{n} * I;
    for (int i = 0; i < I; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
}

ZS_SIMD_CLONES void CpuSwigluBackward(const float* gu, const float* dout, int N, int I,
                                      float* dgu) {
  for (int n = 0; n < N; ++n) {
    const float* g = gu + int64_t{n} * 2 * I;
    const float* u = g + I;
    const float* d = dout + int64_t{n} * I;
    float* dg = dgu + int64_t{n} * 2 * I;
    float* du = dg + I;
    for (int i = 0; i < I; ++i) {
      const float sig = 1.0f / (1.0f + std::exp(-g[i]));
      const float silu = g[i] * sig;
      du[i] = d[i] * silu;
      dg[i] = d[i] * u[i] * sig * (1.0f + g[i] * (1.0f - sig));
    }
  }
}

void CpuPackQkv(const float* q, const float* k, const float* v, int N, int NH, int KV, int D,
                float* qkv) {
  const int group = NH / KV;
  const int64_t C = int64_t{NH} * D;
  for (int n = 0; n < N; ++n) {
    float* row = qkv + n * 3 * C;
    std::memcpy(row, q + n * C, C * sizeof(float));
    const float* kr = k + int64_t{n} * KV * D;
    const float* vr = v + int64_t{n} * KV * D;
    for (int h = 0; h < NH; ++h) {
      std::memcpy(row + C + int64_t{h} * D, kr + int64_t{h / group} * D, D * sizeof(float));
      std::memcpy(row + 2 * C + int64_t{h} * D, vr + int64_t{h / group} * D, D * sizeof(float));
    }
  }
}

ZS_SIMD_CLONES void CpuUnpackQkvGrad(const float* dqkv, int N, int NH, int KV, int D, float* dq,
                                     float* dk, float* dv) {
  const int group = NH / KV;
  const int64_t C = int64_t{NH} * D;
  for (int n = 0; n < N; ++n) {
    const float* row = dqkv + n * 3 * C;
    std::memcpy(dq + n * C, row, C * sizeof(float));
    for (int j = 0; j < KV; ++j) {
      float* dkr = dk + (int64_t{n} * KV + j) * D;
      float* dvr = dv + (int64_t{n} * KV + j) * D;
      for (int i = 0; i < D; ++i) dkr[i] = dvr[i] = 0.0f;
      for (int h = j * group; h < (j + 1) * group; ++h) {
        const float* ks = row + C + int64_t{h} * D;
        const float* vs = row + 2 * C + int64_t{h} * D;
        for (int i = 0; i < D; ++i) {
          dkr[i] += ks[i];
          dvr[i] += vs[i];
        }
      }
    }
  }
}

}  // namespace zeroshard
