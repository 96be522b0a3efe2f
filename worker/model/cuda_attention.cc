// Causal multi-head self-attention of CudaKernels (Vaswani et al., 2017,
// GPT-2's causal mask; the same formulas as cpu_attention.cc), as
// strided-batched cuBLAS GEMMs over the (batch, head) pairs plus the
// kernels of cuda_attention_kernels.cu.
//
// How it works, with hs = C / NH, every (b, h) pair one matrix of a batch of
// B*NH, and q, k, v, y, dy, dq, dk, dv head-major [B,NH,T,hs] workspace:
//   forward:  q, k, v = SplitHeads(qkv); att = q k^T / sqrt(hs) (GEMM);
//             att = causal softmax (in place); y = att v (GEMM);
//             out = MergeHeads(y).
//   backward: q, k, v = SplitHeads(qkv); dy = SplitHeads(dout);
//             datt = dy v^T; dv = att^T dy (GEMMs); ds = causal softmax
//             backward (in place, times 1/sqrt(hs)); dq = ds k;
//             dk = ds^T q (GEMMs); dqkv += MergeHeads(dq, dk, dv).
// GEMMs over the full T x T square are simple and fast enough to context
// 1024 (the upper triangle is computed, then zeroed by the softmax); a
// fused flash-style kernel can replace them later.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/device/cuda_check.h"
#include "worker/model/cuda_gemm.h"
#include "worker/model/cuda_kernels.h"
#include "worker/model/cuda_model_kernels.h"

namespace zeroshard {
namespace {

using model_cuda::GemmBatch;
using model_cuda::GemmShape;

// Workspace pieces start on 256-byte boundaries (cuBLAS's preferred
// alignment).
int64_t Aligned(int64_t floats) { return (floats + 63) / 64 * 64; }

absl::Status CheckHeads(int C, int NH) {
  if (NH < 1 || C % NH != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaKernels attention: C = ", C, " is not a multiple of NH = ", NH));
  }
  return absl::OkStatus();
}

// One (b, h) pair's shapes and strides.
struct Heads {
  int T, hs, pairs;
  int64_t vec;     // T * hs: one pair's q (k, v, ...).
  int64_t square;  // T * T: one pair's att.
  GemmBatch Batch(int64_t a, int64_t b, int64_t c) const {
    return {.count = pairs, .a = a, .b = b, .c = c};
  }
};

Heads MakeHeads(int B, int T, int C, int NH) {
  const int hs = C / NH;
  return {T, hs, B * NH, int64_t{T} * hs, int64_t{T} * T};
}

// q, k, v [B,NH,T,hs] from qkv [B,T,3C].
absl::Status SplitQkv(const float* qkv, int B, int T, int C, int NH, float* q, float* k, float* v,
                      cudaStream_t stream) {
  const int64_t row = 3 * int64_t{C};
  ZS_CUDA_RETURN_IF_ERROR(model_cuda::SplitHeads(qkv, row, B, T, C, NH, q, stream));
  ZS_CUDA_RETURN_IF_ERROR(model_cuda::SplitHeads(qkv + C, row, B, T, C, NH, k, stream));
  ZS_CUDA_RETURN_IF_ERROR(model_cuda::SplitHeads(qkv + 2 * C, row, B, T, C, NH, v, stream));
  return absl::OkStatus();
}

}  // namespace

void CudaKernels::AttentionForward(const float* qkv, int B, int T, int C, int NH, float* out,
                                   float* att) {
  if (!Begin()) return;
  Keep(AttentionForwardImpl(qkv, B, T, C, NH, out, att));
}

void CudaKernels::AttentionBackward(const float* dout, const float* qkv, const float* att, int B,
                                    int T, int C, int NH, float* dqkv) {
  if (!Begin()) return;
  Keep(AttentionBackwardImpl(dout, qkv, att, B, T, C, NH, dqkv));
}

absl::Status CudaKernels::AttentionForwardImpl(const float* qkv, int B, int T, int C, int NH,
                                               float* out, float* att) {
  ZS_RETURN_IF_ERROR(CheckHeads(C, NH));
  if (B <= 0 || T <= 0) return absl::OkStatus();
  const Heads h = MakeHeads(B, T, C, NH);
  const int64_t part = Aligned(int64_t{B} * T * C);
  float* q = Workspace(4 * part);
  if (q == nullptr) return TakeStatus();
  float *k = q + part, *v = k + part, *y = v + part;
  const cudaStream_t stream = static_cast<cudaStream_t>(device_.stream());
  const cublasHandle_t handle = static_cast<cublasHandle_t>(cublas_);
  const bool tf32 = options_.allow_tf32;
  ZS_RETURN_IF_ERROR(SplitQkv(qkv, B, T, C, NH, q, k, v, stream));
  const float scale = 1.0f / std::sqrt(static_cast<float>(h.hs));
  // att [T,T] = scale * q [T,hs] k^T.
  ZS_RETURN_IF_ERROR(model_cuda::RowMajorGemm(
      handle, tf32, GemmShape{.trans_a = false, .trans_b = true, .M = T, .N = T, .K = h.hs}, scale,
      q, k, 0.0f, att, h.Batch(h.vec, h.vec, h.square)));
  ZS_CUDA_RETURN_IF_ERROR(model_cuda::CausalSoftmaxForward(att, int64_t{h.pairs} * T, T, stream));
  // y [T,hs] = att [T,T] v [T,hs].
  ZS_RETURN_IF_ERROR(model_cuda::RowMajorGemm(
      handle, tf32, GemmShape{.trans_a = false, .trans_b = false, .M = T, .N = h.hs, .K = T}, 1.0f,
      att, v, 0.0f, y, h.Batch(h.square, h.vec, h.vec)));
  ZS_CUDA_RETURN_IF_ERROR(
      model_cuda::MergeHeads(y, B, T, C, NH, C, /*accumulate=*/false, out, stream));
  return absl::OkStatus();
}

absl::Status CudaKernels::AttentionBackwardImpl(const float* dout, const float* qkv,
                                                const float* att, int B, int T, int C, int NH,
                                                float* dqkv) {
  ZS_RETURN_IF_ERROR(CheckHeads(C, NH));
  if (B <= 0 || T <= 0) return absl::OkStatus();
  const Heads h = MakeHeads(B, T, C, NH);
  const int64_t part = Aligned(int64_t{B} * T * C);
  float* q = Workspace(7 * part + Aligned(h.pairs * h.square));
  if (q == nullptr) return TakeStatus();
  float *k = q + part, *v = k + part, *dy = v + part;
  float *dq = dy + part, *dk = dq + part, *dv = dk + part, *datt = dv + part;
  const cudaStream_t stream = static_cast<cudaStream_t>(device_.stream());
  const cublasHandle_t handle = static_cast<cublasHandle_t>(cublas_);
  const bool tf32 = options_.allow_tf32;
  const int64_t row = 3 * int64_t{C};
  ZS_RETURN_IF_ERROR(SplitQkv(qkv, B, T, C, NH, q, k, v, stream));
  ZS_CUDA_RETURN_IF_ERROR(model_cuda::SplitHeads(dout, C, B, T, C, NH, dy, stream));
  const GemmShape square{.trans_a = false, .trans_b = true, .M = T, .N = T, .K = h.hs};
  const GemmShape ta{.trans_a = true, .trans_b = false, .M = T, .N = h.hs, .K = T};
  const GemmShape plain{.trans_a = false, .trans_b = false, .M = T, .N = h.hs, .K = T};
  // datt [T,T] = dy v^T; dv [T,hs] = att^T dy.
  ZS_RETURN_IF_ERROR(model_cuda::RowMajorGemm(handle, tf32, square, 1.0f, dy, v, 0.0f, datt,
                                              h.Batch(h.vec, h.vec, h.square)));
  ZS_RETURN_IF_ERROR(model_cuda::RowMajorGemm(handle, tf32, ta, 1.0f, att, dy, 0.0f, dv,
                                              h.Batch(h.square, h.vec, h.vec)));
  const float scale = 1.0f / std::sqrt(static_cast<float>(h.hs));
  ZS_CUDA_RETURN_IF_ERROR(
      model_cuda::CausalSoftmaxBackward(att, datt, int64_t{h.pairs} * T, T, scale, stream));
  // dq [T,hs] = ds k; dk [T,hs] = ds^T q.
  ZS_RETURN_IF_ERROR(model_cuda::RowMajorGemm(handle, tf32, plain, 1.0f, datt, k, 0.0f, dq,
                                              h.Batch(h.square, h.vec, h.vec)));
  ZS_RETURN_IF_ERROR(model_cuda::RowMajorGemm(handle, tf32, ta, 1.0f, datt, q, 0.0f, dk,
                                              h.Batch(h.square, h.vec, h.vec)));
  ZS_CUDA_RETURN_IF_ERROR(model_cuda::MergeHeads(dq, B, T, C, NH, row, true, dqkv, stream));
  ZS_CUDA_RETURN_IF_ERROR(model_cuda::MergeHeads(dk, B, T, C, NH, row, true, dqkv + C, stream));
  ZS_CUDA_RETURN_IF_ERROR(model_cuda::MergeHeads(dv, B, T, C, NH, row, true, dqkv + 2 * C, stream));
  return absl::OkStatus();
}

}  // namespace zeroshard
