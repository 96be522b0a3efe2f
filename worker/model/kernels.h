// The model's compute kernels behind one narrow interface, so that a CUDA
// implementation (cuBLAS + kernels) slots in beside the CPU one (oneDNN
// sgemm + threads) without touching GptModel. All tensors are fp32, row-major,
// contiguous, in the backend's memory (host memory for the CPU backend).
//
// Errors: the methods return nothing; a backend whose work can fail (CUDA)
// keeps the first error and enqueues nothing after it until TakeStatus().
//
// Shapes use N = rows (batch * tokens), C = channels, B = batch, T = tokens,
// NH = heads, V = vocabulary. Every backward ADDS into its gradient outputs
// (d* += ...), so callers zero them once and several uses accumulate; the
// exceptions (plain writes) are marked "writes".
//
// Formulas follow GPT-2 (Radford et al., 2019): LayerNorm eps 1e-5, GELU with
// the tanh approximation (Hendrycks & Gimpel, 2016), attention softmax scaled
// by 1/sqrt(head size) with a causal mask (Vaswani et al., 2017).
//
// Thread safety: a Kernels object may be used from one thread at a time; it
// may use internal worker threads (see SetComputeThreads).
//
// Backends: CpuKernels() below; CudaKernels (cuda_kernels.h, built only
// where nvcc exists) on a CUDA Device's stream.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "worker/model/kernel_constants.h"

namespace zeroshard {

// Where incremental decoding's attention (Kernels::DecodeAttention) reads
// and writes: n new tokens at positions pos .. pos + n - 1 of a cache of P
// positions, NH query heads of D floats, KV kv heads (KV divides NH).
struct DecodeAttentionShape {
  int pos = 0, n = 0, NH = 0, KV = 0, D = 0, P = 0;
  int64_t q_stride = 0;   // Floats between rows of q.
  int64_t kv_stride = 0;  // Floats between rows of k_new and v_new.
};

class Kernels {
 public:
  virtual ~Kernels() = default;

  // C[M,N] = alpha * op(A) * op(B) + beta * C, op(X) = X or X^T.
  // A is [M,K] (or [K,M] when trans_a), B is [K,N] (or [N,K] when trans_b).
  virtual void Matmul(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
                      const float* B, float beta, float* C) = 0;

  // out[n,c] += bias[c].
  virtual void BiasAdd(float* out, const float* bias, int N, int C) = 0;
  // dbias[c] += sum_n dout[n,c].
  virtual void BiasBackward(const float* dout, int N, int C, float* dbias) = 0;

  // out = (x - mean) * rstd * gamma + beta per row; writes out [N,C] and the
  // row statistics mean [N], rstd [N] kept for backward.
  virtual void LayerNormForward(const float* x, const float* gamma, const float* beta, int N, int C,
                                float* out, float* mean, float* rstd) = 0;
  // dx += ..., dgamma += ..., dbeta += ... from dout [N,C].
  virtual void LayerNormBackward(const float* dout, const float* x, const float* gamma,
                                 const float* mean, const float* rstd, int N, int C, float* dx,
                                 float* dgamma, float* dbeta) = 0;

  // out[i] = gelu_tanh(x[i]) (writes), n elements.
  virtual void GeluForward(const float* x, int64_t n, float* out) = 0;
  // dx[i] += gelu_tanh'(x[i]) * dout[i].
  virtual void GeluBackward(const float* x, const float* dout, int64_t n, float* dx) = 0;

  // Causal multi-head self-attention over a fused qkv [B,T,3C] (q, k, v
  // consecutive, head h at channels [h*C/NH, (h+1)*C/NH) of each). Writes
  // out [B,T,C] and the softmax probabilities att [B,NH,T,T] (upper
  // triangle zero) kept for backward.
  virtual void AttentionForward(const float* qkv, int B, int T, int C, int NH, float* out,
                                float* att) = 0;
  // dqkv [B,T,3C] += ... from dout [B,T,C].
  virtual void AttentionBackward(const float* dout, const float* qkv, const float* att, int B,
                                 int T, int C, int NH, float* dqkv) = 0;

  // Per row: probs = softmax(logits) (writes probs [N,V]) and losses[n] =
  // -log probs[n, targets[n]] (writes). targets in [0, V) (checked), or
  // kIgnoreTarget: a position the loss does not count (a prompt token of
  // fine-tuning data, padding), whose loss is 0 and whose probs row is 0, so
  // its gradient is 0 too (PyTorch's ignore_index). probs may alias logits
  // (in place).
  virtual void SoftmaxCrossEntropyForward(const float* logits, const int32_t* targets, int N, int V,
                                          float* probs, float* losses) = 0;
  // dlogits [N,V] (writes) = scale * (probs - onehot(targets)): the gradient
  // of scale * sum_n losses[n] (0 on ignored rows). dlogits may alias probs.
  virtual void SoftmaxCrossEntropyBackward(const float* probs, const int32_t* targets, int N, int V,
                                           float scale, float* dlogits) = 0;

  // out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:] (writes out [B,T,C]); wpe
  // null: no positions (the Llama family's rotary positions live in
  // attention), out[b,t,:] = wte[tokens[b,t],:].
  virtual void EmbeddingForward(const int32_t* tokens, const float* wte, const float* wpe, int B,
                                int T, int C, float* out) = 0;
  // dwte[tokens[b,t],:] += dout[b,t,:]; dwpe[t,:] += dout[b,t,:] (skipped
  // when dwpe is null).
  virtual void EmbeddingBackward(const float* dout, const int32_t* tokens, int B, int T, int C,
                                 float* dwte, float* dwpe) = 0;

  // ---- The Llama family's layers (llama_model.h; HF LlamaForCausalLM) ----
  // RMSNorm (Zhang & Sennrich, 2019, eq. 4) per row of x [N,C]:
  // rstd = 1 / sqrt(mean_c x^2 + eps), out = x * rstd * w. Writes out [N,C]
  // (must not alias x) and rstd [N] kept for backward.
  virtual void RmsNormForward(const float* x, const float* w, int N, int C, float eps, float* out,
                              float* rstd) = 0;
  // dx [N,C] += rstd * (dn - xhat * mean_c(dn * xhat)), dn = dout * w,
  // xhat = x * rstd; dw [C] += sum_n dout * xhat.
  virtual void RmsNormBackward(const float* dout, const float* x, const float* w, const float* rstd,
                               int N, int C, float* dx, float* dw) = 0;
  // Rotary position embedding (Su et al., 2021, RoFormer, eq. 34) in
  // Hugging Face's rotate-half layout, in place on x [B,T,H,D] (D even):
  // for each head and i < D/2, with c = cos[t,i], s = sin[t,i] (tables
  // [T, D/2] in the backend's memory, rope_table.h),
  //   x[i] <- x[i] c - x[i+D/2] s,   x[i+D/2] <- x[i+D/2] c + x[i] s.
  // `inverse` rotates by the opposite angle: the backward (dx = R^T dy).
  virtual void Rope(float* x, int B, int T, int H, int D, const float* cos, const float* sin,
                    bool inverse) = 0;
  // SwiGLU (Shazeer, 2020, "GLU Variants Improve Transformer", eq. 6): gu
  // [N, 2I] holds each row's gate then up projection; out [N,I] (writes) =
  // silu(gate) * up, silu(g) = g / (1 + exp(-g)).
  virtual void SwigluForward(const float* gu, int N, int I, float* out) = 0;
  // dgu [N, 2I] (writes) from dout [N,I]: d gate = dout * up * silu'(gate),
  // d up = dout * silu(gate). dgu must not alias gu.
  virtual void SwigluBackward(const float* gu, const float* dout, int N, int I, float* dgu) = 0;
  // Grouped-query attention's shared keys and values (Ainslie et al., 2023,
  // GQA, section 2.2): q [N, NH, D], k and v [N, KV, D] (NH a multiple of
  // KV) packed into the fused qkv [N, 3 NH D] that AttentionForward reads
  // with C = NH D, head h's key and value taken from kv head h / (NH / KV)
  // (HF's repeat_kv). Writes qkv.
  virtual void PackQkv(const float* q, const float* k, const float* v, int N, int NH, int KV, int D,
                       float* qkv) = 0;
  // The gradients back: dq [N, NH, D] (writes) = dqkv's q part; dk, dv
  // [N, KV, D] (writes) = the sum over each group's NH / KV heads, in head
  // order.
  virtual void UnpackQkvGrad(const float* dqkv, int N, int NH, int KV, int D, float* dq, float* dk,
                             float* dv) = 0;

  // Incremental decoding's causal attention against a KV cache (kv_cache.h;
  // Vaswani et al., 2017, eq. 1, with GQA's head sharing): with g = h /
  // (NH / KV) and s = shape,
  //   1. k_cache[g, s.pos + i, :] = k_new row i's kv head g (writes; v too),
  //      caches [KV, P, D] contiguous;
  //   2. out[i, h D .. h D + D) (writes, rows NH D floats) = sum over j <=
  //      s.pos + i of p_j v_cache[g, j, :], p = softmax_j(q_i,h . k_cache[g,
  //      j, :] / sqrt(D)), q rows s.q_stride floats apart, head h at h D.
  // The CPU sums the softmax in fp64; CUDA in fp32 after subtracting the
  // row's maximum. s.pos + s.n <= s.P (the caller checks).
  virtual void DecodeAttention(const DecodeAttentionShape& s, const float* q, const float* k_new,
                               const float* v_new, float* k_cache, float* v_cache, float* out) = 0;

  // y[i] = a[i] + b[i] (writes; y may alias a or b).
  virtual void Add(const float* a, const float* b, int64_t n, float* y) = 0;
  // y[i] += x[i].
  virtual void Accumulate(const float* x, int64_t n, float* y) = 0;
  // *sum = x[0] + ... + x[n-1] accumulated in fp64 (writes one double, in
  // the backend's memory), in an order fixed by n and the backend (on the
  // CPU, by the instruction set picked at load time): the same bits every
  // call on one machine.
  virtual void Sum(const float* x, int64_t n, double* sum) = 0;

  // The first error a call hit since the last TakeStatus, cleared (OK if
  // none). Backends whose calls cannot fail (the CPU's, which abort on a
  // failed GEMM) always return OK.
  virtual absl::Status TakeStatus() { return absl::OkStatus(); }
};

// The CPU backend: oneDNN sgemm, attention split over (batch, head) pairs
// across the compute threads. One process-wide instance; stateless.
Kernels& CpuKernels();

// Bytes CpuKernels allocates beyond its arguments while a matmul runs:
// oneDNN's sgemm packs both operands into scratch it allocates per call and
// frees after (measured: 6-7 MiB at `medium`'s shapes on 1 thread; it grows
// with the thread count and a matmul's N, e.g. a 50,257-token vocabulary's
// head). A fixed 64 MiB reserve, not a bound. For start-time memory checks
// (EngineOptions::reserved_bytes). Thread-safe.
int64_t CpuKernelsScratchBytes();

// Runs one sgemm so oneDNN compiles its GEMM kernels for this CPU now, not
// in the first step: a worker calls it at start, after checking
// CpuKernelsScratchBytes() against the memory it may use. Thread-safe.
void WarmUpCpuKernels();

// Threads the CPU kernels use (sgemm and attention). Several worker
// processes may share a few cores, so the default is $ZEROSHARD_THREADS or
// 1. Values < 1 are treated as 1. Call from the training thread only.
void SetComputeThreads(int threads);
int ComputeThreads();

}  // namespace zeroshard
