// Fused AdamW over one shard: a pure function, every input explicit
// (STYLE.md point 12; llm.c llmc/adamw.cuh is the shape followed).
//
// How it works, per element i of the shard, in exactly this operation order
// (every implementation: scalar reference, AVX2, AVX-512, CUDA, performs the
// same IEEE single-precision operations, without fused multiply-add, so they
// agree bit for bit):
//   g      = grad[i] * grad_scale            (unscale and clip coefficient)
//   m      = beta1 * m + (1 - beta1) * g     (Kingma & Ba, ICLR'15, alg. 1)
//   v      = beta2 * v + (1 - beta2) * (g * g)
//   denom  = sqrt(v) * inv_sqrt_bc2 + eps
//   master = master * decay - step_size * (m / denom)
// with the per-step constants (computed in double, rounded once to float)
//   step_size = lr / bc1, inv_sqrt_bc2 = 1 / sqrt(bc2), decay = 1 - lr * wd,
//   bc1 = 1 - beta1^step, bc2 = 1 - beta2^step. This is Adam's bias-corrected
// step m_hat / (sqrt(v_hat) + eps) with the corrections folded into
// constants (section 2 of the paper names such a reordering as the cheaper
// form; eps stays on the corrected scale here), and decoupled weight decay
// (AdamW: Loshchilov & Hutter, ICLR'19) as a multiplication, the order
// PyTorch's fused AdamW uses too. One division and one square root an
// element (the earlier form had three divisions).
//   compute_out[i] = master, as fp32 or bf16 (round to nearest even)
// The compute copy is written in the same pass; in the engine it is the
// next all-gather's input buffer.
//
// Shapes: master, m, v, grad hold n fp32 elements; compute_out holds n
// elements of compute_dtype, or is null. Buffers must not overlap, except
// that compute_out may not alias master either. Thread safety: pure
// functions; concurrent calls on disjoint buffers are safe.
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace zeroshard {

struct AdamWHyperparams {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  // Decoupled (AdamW), multiplied by lr.
};

// One shard's buffers.
struct AdamWShard {
  float* master = nullptr;             // fp32 master weights, updated in place.
  float* m = nullptr;                  // First moment, updated in place.
  float* v = nullptr;                  // Second moment, updated in place.
  const float* grad = nullptr;         // Gradient, fp32, read only.
  int64_t n = 0;                       // Elements.
  void* compute_out = nullptr;         // Null, or n elements of compute_dtype.
  DType compute_dtype = DType::kFp32;  // kFp32 or kBf16.
};

// Per-call scalars shared by every implementation, so all of them see the same
// single-precision constants. `step` is the 1-based count of this update.
struct AdamWScalars {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
  // lr / bc1, 1 / sqrt(bc2), 1 - lr * weight_decay: computed in double,
  // rounded once (bc = 1 - beta^step).
  float step_size, inv_sqrt_bc2, decay;
  float grad_scale;
};
AdamWScalars MakeAdamWScalars(const AdamWHyperparams& hp, int64_t step, float grad_scale);

// The scalar reference. ZS_CHECKs step >= 1, n >= 0 and a supported dtype.
void AdamWReference(const AdamWHyperparams& hp, int64_t step, float grad_scale,
                    const AdamWShard& shard);

// The fast CPU version: AVX-512 or AVX2, whichever streams faster on this
// kind of CPU (adamw_isa.h: by vendor, or set with --adamw-isa), scalar
// where it has neither; the shard is split
// into chunks over up to `num_threads` threads (0 = hardware concurrency,
// capped at 16; small shards stay on the calling thread). Bit-identical to
// AdamWReference.
void AdamWCpu(const AdamWHyperparams& hp, int64_t step, float grad_scale, const AdamWShard& shard,
              int num_threads = 0);

// Which SIMD path AdamWCpu takes on this CPU: "avx512", "avx2" or "scalar"
// (adamw_isa.h's ChosenAdamWIsa).
const char* AdamWCpuIsa();

// Sum of squares of x[0..n), accumulated in double; multi-threaded like
// AdamWCpu. Used for global-norm gradient clipping.
double SumSquaresCpu(const float* x, int64_t n, int num_threads = 0);

}  // namespace zeroshard
