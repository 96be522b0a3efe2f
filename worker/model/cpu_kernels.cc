// CPU backend of worker/model/kernels.h (formulas documented there). The
// attention kernels live in cpu_attention.cc; this file holds the rest.
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/status_macros.h"
#include "worker/model/cpu_kernels_internal.h"
#include "worker/model/cpu_row_math.h"
#include "worker/model/cpu_simd.h"
#include "worker/model/fast_math.h"
#include "worker/model/kernel_constants.h"
#include "worker/model/kernels.h"

namespace zeroshard {
namespace {

int InitialThreads() {
  const char* env = std::getenv("ZEROSHARD_THREADS");
  const int n = env != nullptr ? std::atoi(env) : 1;
  return std::max(1, n);
}

std::atomic<int>& ThreadsSetting() {
  static std::atomic<int> threads{InitialThreads()};
  return threads;
}

// This thread's sgemm thread count while a ScopedSgemmThreads lives on it
// (0: ThreadsSetting), and the count last given to OpenMP on this thread
// (OpenMP's nthreads-var is per thread).
thread_local int t_sgemm_threads = 0;
thread_local int t_omp_threads = 0;

// oneDNN packs a GEMM's operands into scratch it allocates per call (see
// CpuKernelsScratchBytes in kernels.h).
constexpr int64_t kCpuGemmScratchBytes = int64_t{64} << 20;

// The element-wise kernels, multi-versioned by instruction set (cpu_simd.h).
ZS_SIMD_CLONES void BiasAddLoop(float* out, const float* bias, int N, int C) {
  for (int n = 0; n < N; ++n) {
    float* row = out + int64_t{n} * C;
    for (int c = 0; c < C; ++c) row[c] += bias[c];
  }
}

ZS_SIMD_CLONES void BiasBackwardLoop(const float* dout, int N, int C, float* dbias) {
  for (int n = 0; n < N; ++n) {
    const float* row = dout + int64_t{n} * C;
    for (int c = 0; c < C; ++c) dbias[c] += row[c];
  }
}

ZS_SIMD_CLONES void LayerNormForwardLoop(const float* x, const float* gamma, const float* beta,
                                         int N, int C, float* out, float* mean, float* rstd) {
  for (int n = 0; n < N; ++n) {
    const float* xr = x + int64_t{n} * C;
    float* yr = out + int64_t{n} * C;
    float m = 0.0f;
    for (int c = 0; c < C; ++c) m += xr[c];
    m /= static_cast<float>(C);
    float v = 0.0f;
    for (int c = 0; c < C; ++c) v += (xr[c] - m) * (xr[c] - m);
    v /= static_cast<float>(C);
    const float s = 1.0f / std::sqrt(v + kLayerNormEps);
    for (int c = 0; c < C; ++c) yr[c] = (xr[c] - m) * s * gamma[c] + beta[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

// dx = rstd * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)),
// dnorm = dy * gamma, xhat = (x - mean) * rstd.
ZS_SIMD_CLONES void LayerNormBackwardLoop(const float* dout, const float* x, const float* gamma,
                                          const float* mean, const float* rstd, int N, int C,
                                          float* dx, float* dgamma, float* dbeta) {
  for (int n = 0; n < N; ++n) {
    const float* dy = dout + int64_t{n} * C;
    const float* xr = x + int64_t{n} * C;
    float* dxr = dx + int64_t{n} * C;
    const float m = mean[n], s = rstd[n];
    float mean_dnorm = 0.0f, mean_dnorm_xhat = 0.0f;
    for (int c = 0; c < C; ++c) {
      const float xhat = (xr[c] - m) * s;
      const float dnorm = dy[c] * gamma[c];
      mean_dnorm += dnorm;
      mean_dnorm_xhat += dnorm * xhat;
      dgamma[c] += dy[c] * xhat;
      dbeta[c] += dy[c];
    }
    mean_dnorm /= static_cast<float>(C);
    mean_dnorm_xhat /= static_cast<float>(C);
    for (int c = 0; c < C; ++c) {
      const float xhat = (xr[c] - m) * s;
      dxr[c] += s * (dy[c] * gamma[c] - mean_dnorm - xhat * mean_dnorm_xhat);
    }
  }
}

ZS_SIMD_CLONES void GeluForwardLoop(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    out[i] = 0.5f * v * (1.0f + FastTanh(kGeluScale * (v + kGeluCubic * v * v * v)));
  }
}

ZS_SIMD_CLONES void GeluBackwardLoop(const float* x, const float* dout, int64_t n, float* dx) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float th = FastTanh(kGeluScale * (v + kGeluCubic * v * v * v));
    const float dinner = kGeluScale * (1.0f + 3.0f * kGeluCubic * v * v);
    dx[i] += (0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * dinner) * dout[i];
  }
}

// Row helpers, forced inline so each clone below compiles them for its own
// instruction set (one dispatch a kernel call, not one a row).
ZS_ALWAYS_INLINE void AddRow(const float* a, const float* b, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

ZS_ALWAYS_INLINE void AccumulateRow(const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

// Per row: probs = softmax(l) (p may alias l), loss = -log p[target].
ZS_SIMD_CLONES void SoftmaxCrossEntropyForwardLoop(const float* logits, const int32_t* targets,
                                                   int N, int V, float* probs, float* losses) {
  for (int n = 0; n < N; ++n) {
    const float* l = logits + int64_t{n} * V;
    float* p = probs + int64_t{n} * V;
    if (targets[n] == kIgnoreTarget) {
      std::fill(p, p + V, 0.0f);
      losses[n] = 0.0f;
      continue;
    }
    ZS_CHECK(targets[n] >= 0 && targets[n] < V);
    const float target_logit = l[targets[n]];  // Read before p may overwrite it.
    float sum;
    const float mx = SoftmaxRow(l, V, p, &sum);
    // log-sum-exp form: exact even when probs[target] underflows.
    losses[n] = std::log(sum) + mx - target_logit;
  }
}

ZS_SIMD_CLONES void SoftmaxCrossEntropyBackwardLoop(const float* probs, const int32_t* targets,
                                                    int N, int V, float scale, float* dlogits) {
  for (int n = 0; n < N; ++n) {
    const float* p = probs + int64_t{n} * V;
    float* d = dlogits + int64_t{n} * V;
    for (int v = 0; v < V; ++v) d[v] = scale * p[v];
    if (targets[n] != kIgnoreTarget) d[targets[n]] -= scale;
  }
}

ZS_SIMD_CLONES void EmbeddingForwardLoop(const int32_t* tokens, const float* wte, const float* wpe,
                                         int B, int T, int C, float* out) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const float* row = wte + int64_t{tokens[b * T + t]} * C;
      float* o = out + (int64_t{b} * T + t) * C;
      if (wpe == nullptr) {
        std::memcpy(o, row, sizeof(float) * C);
      } else {
        AddRow(row, wpe + int64_t{t} * C, C, o);
      }
    }
  }
}

ZS_SIMD_CLONES void EmbeddingBackwardLoop(const float* dout, const int32_t* tokens, int B, int T,
                                          int C, float* dwte, float* dwpe) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const float* d = dout + (int64_t{b} * T + t) * C;
      AccumulateRow(d, C, dwte + int64_t{tokens[b * T + t]} * C);
      if (dwpe != nullptr) AccumulateRow(d, C, dwpe + int64_t{t} * C);
    }
  }
}

ZS_SIMD_CLONES void AddLoop(const float* a, const float* b, int64_t n, float* y) {
  AddRow(a, b, n, y);
}

ZS_SIMD_CLONES void AccumulateLoop(const float* x, int64_t n, float* y) { AccumulateRow(x, n, y); }

// Vectorised under this file's -fassociative-math: the order is the
// compiler's, fixed at build time.
ZS_SIMD_CLONES double SumLoop(const float* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  return sum;
}

class CpuKernelsImpl final : public Kernels {
 public:
  void Matmul(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
              const float* B, float beta, float* C) override {
    CpuSgemm(trans_a, trans_b, M, N, K, alpha, A, trans_a ? M : K, B, trans_b ? K : N, beta, C, N);
  }

  void BiasAdd(float* out, const float* bias, int N, int C) override {
    BiasAddLoop(out, bias, N, C);
  }

  void BiasBackward(const float* dout, int N, int C, float* dbias) override {
    BiasBackwardLoop(dout, N, C, dbias);
  }

  void LayerNormForward(const float* x, const float* gamma, const float* beta, int N, int C,
                        float* out, float* mean, float* rstd) override {
    LayerNormForwardLoop(x, gamma, beta, N, C, out, mean, rstd);
  }

  void LayerNormBackward(const float* dout, const float* x, const float* gamma, const float* mean,
                         const float* rstd, int N, int C, float* dx, float* dgamma,
                         float* dbeta) override {
    LayerNormBackwardLoop(dout, x, gamma, mean, rstd, N, C, dx, dgamma, dbeta);
  }

  void GeluForward(const float* x, int64_t n, float* out) override { GeluForwardLoop(x, n, out); }

  void GeluBackward(const float* x, const float* dout, int64_t n, float* dx) override {
    GeluBackwardLoop(x, dout, n, dx);
  }

  void AttentionForward(const float* qkv, int B, int T, int C, int NH, float* out,
                        float* att) override {
    CpuAttentionForward(qkv, B, T, C, NH, out, att);
  }

  void AttentionBackward(const float* dout, const float* qkv, const float* att, int B, int T, int C,
                         int NH, float* dqkv) override {
    CpuAttentionBackward(dout, qkv, att, B, T, C, NH, dqkv);
  }

  void SoftmaxCrossEntropyForward(const float* logits, const int32_t* targets, int N, int V,
                                  float* probs, float* losses) override {
    SoftmaxCrossEntropyForwardLoop(logits, targets, N, V, probs, losses);
  }

  void SoftmaxCrossEntropyBackward(const float* probs, const int32_t* targets, int N, int V,
                                   float scale, float* dlogits) override {
    SoftmaxCrossEntropyBackwardLoop(probs, targets, N, V, scale, dlogits);
  }

  void EmbeddingForward(const int32_t* tokens, const float* wte, const float* wpe, int B, int T,
                        int C, float* out) override {
    EmbeddingForwardLoop(tokens, wte, wpe, B, T, C, out);
  }

  void EmbeddingBackward(const float* dout, const int32_t* tokens, int B, int T, int C, float* dwte,
                         float* dwpe) override {
    EmbeddingBackwardLoop(dout, tokens, B, T, C, dwte, dwpe);
  }

  void RmsNormForward(const float* x, const float* w, int N, int C, float eps, float* out,
                      float* rstd) override {
    CpuRmsNormForward(x, w, N, C, eps, out, rstd);
  }

  void RmsNormBackward(const float* dout, const float* x, const float* w, const float* rstd, int N,
                       int C, float* dx, float* dw) override {
    CpuRmsNormBackward(dout, x, w, rstd, N, C, dx, dw);
  }

  void Rope(float* x, int B, int T, int H, int D, const float* cos, const float* sin,
            bool inverse) override {
    CpuRope(x, B, T, H, D, cos, sin, inverse);
  }

  void SwigluForward(const float* gu, int N, int I, float* out) override {
    CpuSwigluForward(gu, N, I, out);
  }

  void SwigluBackward(const float* gu, const float* dout, int N, int I, float* dgu) override {
    CpuSwigluBackward(gu, dout, N, I, dgu);
  }

  void PackQkv(const float* q, const float* k, const float* v, int N, int NH, int KV, int D,
               float* qkv) override {
    CpuPackQkv(q, k, v, N, NH, KV, D, qkv);
  }

  void UnpackQkvGrad(const float* dqkv, int N, int NH, int KV, int D, float* dq, float* dk,
                     float* dv) override {
    CpuUnpackQkvGrad(dqkv, N, NH, KV, D, dq, dk, dv);
  }

  void DecodeAttention(const DecodeAttentionShape& s, const float* q, const float* k_new,
                       const float* v_new, float* k_cache, float* v_cache, float* out) override {
    CpuDecodeAttention(s, q, k_new, v_new, k_cache, v_cache, out);
  }
  void Add(const float* a, const float* b, int64_t n, float* y) override { AddLoop(a, b, n, y); }

  void Accumulate(const float* x, int64_t n, float* y) override { AccumulateLoop(x, n, y); }
  void Sum(const float* x, int64_t n, double* sum) override { *sum = SumLoop(x, n); }
};

}  // namespace

Kernels& CpuKernels() {
  static CpuKernelsImpl* kernels = new CpuKernelsImpl();
  return *kernels;
}

int64_t CpuKernelsScratchBytes() { return kCpuGemmScratchBytes; }

void CpuSgemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A, int lda,
              const float* B, int ldb, float beta, float* C, int ldc) {
  const int threads = t_sgemm_threads > 0 ? t_sgemm_threads : ThreadsSetting().load();
  if (threads != t_omp_threads) {
    omp_set_num_threads(threads);
    t_omp_threads = threads;
  }
  const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, alpha,
                                          A, lda, B, ldb, beta, C, ldc);
  if (status != dnnl_success) {  // Kernels return nothing: a failed GEMM ends the process.
    std::fprintf(stderr, "cpu: dnnl_sgemm (%d x %d x %d) failed with oneDNN status %d%s\n", M, N, K,
                 static_cast<int>(status), status == dnnl_out_of_memory ? " (out of memory)" : "");
    std::abort();
  }
}

ScopedSgemmThreads::ScopedSgemmThreads(int threads) : saved_(t_sgemm_threads) {
  t_sgemm_threads = std::max(1, threads);
}

ScopedSgemmThreads::~ScopedSgemmThreads() { t_sgemm_threads = saved_; }

void WarmUpCpuKernels() {
  // oneDNN compiles its GEMM kernels for this CPU on first use.
  constexpr int kN = 256;
  std::vector<float> a(kN * kN, 1.0f), c(kN * kN, 0.0f);
  CpuKernels().Matmul(false, false, kN, kN, kN, 1.0f, a.data(), a.data(), 0.0f, c.data());
}

void SetComputeThreads(int threads) { ThreadsSetting() = std::max(1, threads); }

int ComputeThreads() { return ThreadsSetting(); }

}  // namespace zeroshard
