// The CUDA backend of worker/model/kernels.h (target zeroshard_model_cuda,
// built only where nvcc exists): every operation enqueued on one CUDA
// Device's stream, matmuls on cuBLAS (cuda_gemm.h), the rest in the kernels
// of cuda_model_kernels.h. Same shapes and "adds"/"writes" rules as
// Kernels; every pointer is device memory of that Device.
//
// Agreement with CpuKernels (tests/model/cuda_kernels_test.cc): within
// 1e-5 relative in fp32 (summation order and expf/tanhf against the CPU's
// polynomials differ), 1e-3 with TF32 matmuls, 1e-2 with bf16 ones.
//
// Determinism: the bias, LayerNorm, RMSNorm and embedding parameter
// gradients use no atomics and sum in an order fixed by the shapes
// (cuda_reduce_kernels.cu), cuBLAS is reproducible on one GPU model and
// stream, so the same inputs give the same bits every run.
//
// Errors: Kernels' methods return nothing, so the first CUDA or cuBLAS
// error (a failed launch, scratch that cannot be allocated, C not a
// multiple of NH, NH not a multiple of KV, an odd rotary head size D) is
// kept; every later call enqueues nothing until TakeStatus() hands it
// over. Faults during execution surface, as for the Device, at the next
// Device::Synchronize / event wait. A target or token outside [0, V) gives
// NaN losses / embedding rows instead of the CPU's check (a kernel cannot
// stop the process); nothing is written outside.
//
// Scratch: attention, the column reductions and bf16 matmuls' rounded
// inputs use one device workspace of this object, grown on demand through
// Device::Allocate (stream-ordered) and reused by later calls;
// scratch_bytes() reports its size for memory accounting (attention
// backward needs 7 B*T*C + B*NH*T*T floats, a bf16 matmul (M K + K N) / 2).
//
// Thread safety: one thread at a time (Kernels' rule); each call makes the
// device current on the calling thread first.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/device/device.h"
#include "worker/model/kernels.h"

namespace zeroshard {

struct CudaKernelsOptions {
  // Matmuls (not attention's softmax) with inputs rounded to TF32 on tensor
  // cores, accumulating in fp32 (CUBLAS_COMPUTE_32F_FAST_TF32).
  bool allow_tf32 = false;
  // Rows of wte, which the embedding methods need and Kernels does not pass:
  // the backward sums one row per vocabulary entry, and both check tokens
  // against it. The model's ModelConfig::vocab.
  int vocab = 256;
  // Matmuls (not attention's) in bf16: both inputs rounded to bf16 (to
  // nearest even) in the workspace, products accumulated and C kept in fp32
  // (mixed precision; ~1e-2 relative to fp32). Takes precedence over
  // allow_tf32 for them.
  bool bf16_matmul = false;
};

class CudaKernels final : public Kernels {
 public:
  // INVALID_ARGUMENT unless device.kind() is kCuda and vocab >= 1; else cuBLAS handle
  // creation's error (FAILED_PRECONDITION / RESOURCE_EXHAUSTED). `device`
  // must outlive the kernels.
  static absl::StatusOr<std::unique_ptr<CudaKernels>> Create(
      Device& device, const CudaKernelsOptions& options = {});
  ~CudaKernels() override;
  CudaKernels(const CudaKernels&) = delete;
  CudaKernels& operator=(const CudaKernels&) = delete;

  // The first error since creation or the last TakeStatus (OK if none);
  // clears it so calls run again.
  absl::Status TakeStatus() override;
  int64_t scratch_bytes() const { return scratch_bytes_; }
  const CudaKernelsOptions& options() const { return options_; }

  void Matmul(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const float* A,
              const float* B, float beta, float* C) override;
  void BiasAdd(float* out, const float* bias, int N, int C) override;
  void BiasBackward(const float* dout, int N, int C, float* dbias) override;
  void LayerNormForward(const float* x, const float* gamma, const float* beta, int N, int C,
                        float* out, float* mean, float* rstd) override;
  void LayerNormBackward(const float* dout, const float* x, const float* gamma, const float* mean,
                         const float* rstd, int N, int C, float* dx, float* dgamma,
                         float* dbeta) override;
  void GeluForward(const float* x, int64_t n, float* out) override;
  void GeluBackward(const float* x, const float* dout, int64_t n, float* dx) override;
  // cuda_attention.cc.
  void AttentionForward(const float* qkv, int B, int T, int C, int NH, float* out,
                        float* att) override;
  void AttentionBackward(const float* dout, const float* qkv, const float* att, int B, int T, int C,
                         int NH, float* dqkv) override;
  void SoftmaxCrossEntropyForward(const float* logits, const int32_t* targets, int N, int V,
                                  float* probs, float* losses) override;
  void SoftmaxCrossEntropyBackward(const float* probs, const int32_t* targets, int N, int V,
                                   float scale, float* dlogits) override;
  // Tokens index options().vocab rows of wte.
  void EmbeddingForward(const int32_t* tokens, const float* wte, const float* wpe, int B, int T,
                        int C, float* out) override;
  void EmbeddingBackward(const float* dout, const int32_t* tokens, int B, int T, int C, float* dwte,
                         float* dwpe) override;
  // The Llama family's layers (kernels in cuda_llama_kernels.cu).
  void RmsNormForward(const float* x, const float* w, int N, int C, float eps, float* out,
                      float* rstd) override;
  void RmsNormBackward(const float* dout, const float* x, const float* w, const float* rstd, int N,
                       int C, float* dx, float* dw) override;
  void Rope(float* x, int B, int T, int H, int D, const float* cos, const float* sin,
            bool inverse) override;
  void SwigluForward(const float* gu, int N, int I, float* out) override;
  void SwigluBackward(const float* gu, const float* dout, int N, int I, float* dgu) override;
  void PackQkv(const float* q, const float* k, const float* v, int N, int NH, int KV, int D,
               float* qkv) override;
  void UnpackQkvGrad(const float* dqkv, int N, int NH, int KV, int D, float* dq, float* dk,
                     float* dv) override;
  // Head sizes up to model_cuda::kMaxDecodeHeadDim (256); larger ones keep
  // INVALID_ARGUMENT.
  void DecodeAttention(const DecodeAttentionShape& s, const float* q, const float* k_new,
                       const float* v_new, float* k_cache, float* v_cache, float* out) override;
  void Add(const float* a, const float* b, int64_t n, float* y) override;
  void Accumulate(const float* x, int64_t n, float* y) override;
  void Sum(const float* x, int64_t n, double* sum) override;

 private:
  CudaKernels(Device& device, const CudaKernelsOptions& options, void* cublas)
      : device_(device), options_(options), cublas_(cublas) {}
  // False when an earlier error is pending or the device cannot be made
  // current (then kept as the error): the caller enqueues nothing.
  bool Begin();
  // Keeps the first error.
  void Keep(absl::Status status);
  // At least `floats` floats of workspace (contents undefined), or null
  // with the error kept.
  float* Workspace(int64_t floats);
  // cuda_attention.cc: the batched GEMMs of one attention pass.
  absl::Status AttentionForwardImpl(const float* qkv, int B, int T, int C, int NH, float* out,
                                    float* att);
  absl::Status AttentionBackwardImpl(const float* dout, const float* qkv, const float* att, int B,
                                     int T, int C, int NH, float* dqkv);

  Device& device_;
  const CudaKernelsOptions options_;
  void* const cublas_;  // cublasHandle_t, bound to device_'s stream.
  absl::Status error_;
  void* scratch_ = nullptr;
  int64_t scratch_bytes_ = 0;
};

}  // namespace zeroshard
