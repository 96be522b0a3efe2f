// CudaKernels: creation, the sticky error, the workspace, and every
// operation but attention (cuda_attention.cc). Each method checks for a
// pending error, then enqueues cuBLAS calls or the launchers of
// cuda_model_kernels.h on the device's stream.
#include "worker/model/cuda_kernels.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/device/cuda_check.h"
#include "worker/model/cuda_blas.h"
#include "worker/model/cuda_gemm.h"
#include "worker/model/cuda_model_kernels.h"

namespace zeroshard {
namespace {

cudaStream_t StreamOf(const Device& device) { return static_cast<cudaStream_t>(device.stream()); }
cublasHandle_t Handle(void* cublas) { return static_cast<cublasHandle_t>(cublas); }

// The status of a launcher call.
#define ZS_LAUNCH_STATUS(expr) ::zeroshard::CudaStatus((expr), #expr, __FILE__, __LINE__)

}  // namespace

absl::StatusOr<std::unique_ptr<CudaKernels>> CudaKernels::Create(
    Device& device, const CudaKernelsOptions& options) {
  if (device.kind() != DeviceKind::kCuda) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaKernels: device ", device.name(), " is not a CUDA device"));
  }
  if (options.vocab < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaKernels: vocab must be >= 1, got ", options.vocab));
  }
  ZS_CUDA_RETURN_IF_ERROR(cudaSetDevice(device.ordinal()));
  ZS_ASSIGN_OR_RETURN(const model_cuda::CublasApi* blas, model_cuda::Cublas());
  cublasHandle_t handle = nullptr;
  ZS_CUBLAS_RETURN_IF_ERROR(blas->Create(&handle));
  // Only the compute type of each call picks TF32 (cuda_gemm.cc), not the
  // handle's math mode.
  absl::Status bound = model_cuda::CublasStatus(blas->SetStream(handle, StreamOf(device)),
                                                "cublasSetStream", __FILE__, __LINE__);
  if (bound.ok()) {
    bound = model_cuda::CublasStatus(blas->SetMathMode(handle, CUBLAS_DEFAULT_MATH),
                                     "cublasSetMathMode", __FILE__, __LINE__);
  }
  if (!bound.ok()) {
    blas->Destroy(handle);
    return bound;
  }
  return std::unique_ptr<CudaKernels>(new CudaKernels(device, options, handle));
}

CudaKernels::~CudaKernels() {
  if (cudaSetDevice(device_.ordinal()) != cudaSuccess) cudaGetLastError();
  device_.Free(scratch_);  // Stream-ordered: after the work that used it.
  // Created through the loaded API, which stays loaded.
  (*model_cuda::Cublas())->Destroy(Handle(cublas_));
}

absl::Status CudaKernels::TakeStatus() { return std::exchange(error_, absl::OkStatus()); }

void CudaKernels::Keep(absl::Status status) {
  if (error_.ok()) error_ = std::move(status);
}

bool CudaKernels::Begin() {
  if (!error_.ok()) return false;
  Keep(CudaStatus(cudaSetDevice(device_.ordinal()), "cudaSetDevice", __FILE__, __LINE__));
  return error_.ok();
}

float* CudaKernels::Workspace(int64_t floats) {
  const int64_t bytes = floats * static_cast<int64_t>(sizeof(float));
  if (bytes <= scratch_bytes_) return static_cast<float*>(scratch_);
  device_.Free(scratch_);
  scratch_ = nullptr;
  scratch_bytes_ = 0;
  absl::StatusOr<void*> grown = device_.Allocate(bytes);
  if (!grown.ok()) {
    Keep(absl::Status(grown.status().code(), absl::StrCat("CudaKernels workspace of ", bytes,
                                                          " bytes: ", grown.status().message())));
    return nullptr;
  }
  scratch_ = *grown;
  scratch_bytes_ = bytes;
  return static_cast<float*>(scratch_);
}

void CudaKernels::Matmul(bool trans_a, bool trans_b, int M, int N, int K, float alpha,
                         const float* A, const float* B, float beta, float* C) {
  if (!Begin()) return;
  const model_cuda::GemmShape shape{.trans_a = trans_a, .trans_b = trans_b, .M = M, .N = N, .K = K};
  if (!options_.bf16_matmul) {
    Keep(model_cuda::RowMajorGemm(Handle(cublas_), options_.allow_tf32, shape, alpha, A, B, beta,
                                  C));
    return;
  }
  // A then B rounded to bf16 (2 bytes each) in the workspace, B's copy on
  // a 64-byte boundary (32 elements) for cuBLAS's aligned kernels.
  const int64_t a_n = int64_t{M} * K, b_n = int64_t{K} * N;
  const int64_t b_at = (a_n + 31) / 32 * 32;
  // Null without an error only when both are empty (K = 0: C = beta C).
  float* work = Workspace((b_at + b_n + 1) / 2);
  if (!error_.ok()) return;
  uint16_t* a16 = reinterpret_cast<uint16_t*>(work);
  uint16_t* b16 = a16 + b_at;
  Keep(device_.Convert(A, DType::kFp32, a16, DType::kBf16, a_n));
  Keep(device_.Convert(B, DType::kFp32, b16, DType::kBf16, b_n));
  if (!error_.ok()) return;
  Keep(model_cuda::RowMajorGemmBf16(Handle(cublas_), shape, alpha, a16, b16, beta, C));
}

void CudaKernels::BiasAdd(float* out, const float* bias, int N, int C) {
  if (!Begin()) return;
  Keep(ZS_LAUNCH_STATUS(model_cuda::BiasAdd(out, bias, N, C, StreamOf(device_))));
}

void CudaKernels::BiasBackward(const float* dout, int N, int C, float* dbias) {
  if (!Begin()) return;
  float* partials = Workspace(model_cuda::ColumnPartials(N) * C);
  if (partials == nullptr) return;
  Keep(ZS_LAUNCH_STATUS(model_cuda::ColumnSums(model_cuda::ColumnTerm::kValue, dout, nullptr,
                                               nullptr, nullptr, N, C, partials, dbias,
                                               StreamOf(device_))));
}

void CudaKernels::LayerNormForward(const float* x, const float* gamma, const float* beta, int N,
                                   int C, float* out, float* mean, float* rstd) {
  if (!Begin()) return;
  Keep(ZS_LAUNCH_STATUS(
      model_cuda::LayerNormForward(x, gamma, beta, N, C, out, mean, rstd, StreamOf(device_))));
}

void CudaKernels::LayerNormBackward(const float* dout, const float* x, const float* gamma,
                                    const float* mean, const float* rstd, int N, int C, float* dx,
                                    float* dgamma, float* dbeta) {
  if (!Begin()) return;
  const cudaStream_t stream = StreamOf(device_);
  float* partials = Workspace(model_cuda::ColumnPartials(N) * C);
  if (partials == nullptr) return;
  // The two sums share `partials`: the stream runs them one after the other.
  Keep(ZS_LAUNCH_STATUS(model_cuda::ColumnSums(model_cuda::ColumnTerm::kNormGrad, dout, x, mean,
                                               rstd, N, C, partials, dgamma, stream)));
  Keep(ZS_LAUNCH_STATUS(model_cuda::ColumnSums(model_cuda::ColumnTerm::kValue, dout, nullptr,
                                               nullptr, nullptr, N, C, partials, dbeta, stream)));
  Keep(ZS_LAUNCH_STATUS(
      model_cuda::LayerNormBackwardInput(dout, x, gamma, mean, rstd, N, C, dx, stream)));
}

void CudaKernels::GeluForward(const float* x, int64_t n, float* out) {
  if (!Begin()) return;
  Keep(ZS_LAUNCH_STATUS(model_cuda::GeluForward(x, n, out, StreamOf(device_))));
}

void CudaKernels::GeluBackward(const float* x, const float* dout, int64_t n, float* dx) {
  if (!Begin()) return;
  Keep(ZS_LAUNCH_STATUS(model_cuda::GeluBackward(x, dout, n, dx, StreamOf(device_))));
}

void CudaKernels::SoftmaxCrossEntropyForward(const float* logits, const int32_t* targets, int N,
                                             int V, float* probs, float* losses) {
  if (!Begin()) return;
  Keep(ZS_LAUNCH_STATUS(model_cuda::SoftmaxCrossEntropyForward(logits, targets, N, V, probs, losses,
                                                               StreamOf(device_))));
}

void CudaKernels::SoftmaxCrossEntropyBackward(const float* probs, const int32_t* targets, int N,
                                              int V, float scale, float* dlogits) {
  if (!Begin()) return;
  Keep(ZS_LAUNCH_STATUS(model_cuda::SoftmaxCrossEntropyBackward(probs, targets, N, V, scale,
                                                                dlogits, StreamOf(device_))));
}

void CudaKernels::EmbeddingForward(const int32_t* tokens, const float* wte, const float* wpe, int B,
                                   int T, int C, float* out) {
  if (!Begin()) return;
  Keep(ZS_LAUNCH_STATUS(model_cuda::EmbeddingForward(tokens, wte, wpe, B, T, C, options_.vocab, out,
                                                     StreamOf(device_))));
}

void CudaKernels::EmbeddingBackward(const float* dout, const int32_t* tokens, int B, int T, int C,
                                    float* dwte, float* dwpe) {
  if (!Begin()) return;
  Keep(ZS_LAUNCH_STATUS(model_cuda::EmbeddingBackward(dout, tokens, B, T, C, options_.vocab, dwte,
                                                      dwpe, StreamOf(device_))));
}

void CudaKernels::RmsNormForward(const float* x, const float* w, int N, int C, float eps,
                                 float* out, float* rstd) {
  if (!Begin()) return;
  Keep(ZS_LAUNCH_STATUS(model_cuda::RmsNormForward(x, w, N, C, eps, out, rstd, StreamOf(device_))));
}

void CudaKernels::RmsNormBackward(const float* dout, const float* x, const float* w,
                                  const float* rstd, int N, int C, float* dx, float* dw) {
  if (!Begin()) return;
  const cudaStream_t stream = StreamOf(device_);
  // dw as LayerNorm's dgamma: a column sum in a fixed order, no atomics.
  float* partials = Workspace(model_cuda::ColumnPartials(N) * C);
  if (partials == nullptr) return;
  Keep(ZS_LAUNCH_STATUS(model_cuda::ColumnSums(model_cuda::ColumnTerm::kRmsGrad, dout, x, nullptr,
                                               rstd, N, C, partials, dw, stream)));
  Keep(ZS_LAUNCH_STATUS(model_cuda::RmsNormBackwardInput(dout, x, w, rstd, N, C, dx, stream)));
}

void CudaKernels::Rope(float* x, int B, int T, int H, int D, const float* cos, const float* sin,
                       bool inverse) {
  if (!Begin()) return;
  Keep(ZS_LAUNCH_STATUS(model_cuda::Rope(x, B, T, H, D, cos, sin, inverse, StreamOf(device_))));
}

void CudaKernels::DecodeAttention(const DecodeAttentionShape& s, const float* q, const float* k_new,
                                  const float* v_new, float* k_cache, float* v_cache, float* out) {
  if (!Begin()) return;
  Keep(ZS_LAUNCH_STATUS(model_cuda::DecodeAttention(q, s.q_stride, k_new, v_new, s.kv_stride, s.pos,
                                                    s.n, s.NH, s.KV, s.D, s.P, k_cache, v_cache,
                                                    out, StreamOf(device_))));
}

void CudaKernels::SwigluForward(const float* gu, int N, int I, float* out) {
  if (!Begin()) return;
  Keep(ZS_LAUNCH_STATUS(model_cuda::SwigluForward(gu, N, I, out, StreamOf(device_))));
}

void CudaKernels::SwigluBackward(const float* gu, const float* dout, int N, int I, float* dgu) {
  if (!Begin()) return;
  Keep(ZS_LAUNCH_STATUS(model_cuda::SwigluBackward(gu, dout, N, I, dgu, StreamOf(device_))));
}

void CudaKernels::PackQkv(const float* q, const float* k, const float* v, int N, int NH, int KV,
                          int D, float* qkv) {
  if (!Begin()) return;
  Keep(ZS_LAUNCH_STATUS(model_cuda::PackQkv(q, k, v, N, NH, KV, D, qkv, StreamOf(device_))));
}

void CudaKernels::UnpackQkvGrad(const float* dqkv, int N, int NH, int KV, int D, float* dq,
                                float* dk, float* dv) {
  if (!Begin()) return;
  Keep(ZS_LAUNCH_STATUS(
      model_cuda::UnpackQkvGrad(dqkv, N, NH, KV, D, dq, dk, dv, StreamOf(device_))));
}

void CudaKernels::Add(const float* a, const float* b, int64_t n, float* y) {
  if (!Begin()) return;
  Keep(ZS_LAUNCH_STATUS(model_cuda::Add(a, b, n, y, StreamOf(device_))));
}

void CudaKernels::Accumulate(const float* x, int64_t n, float* y) {
  if (!Begin()) return;
  Keep(ZS_LAUNCH_STATUS(model_cuda::Accumulate(x, n, y, StreamOf(device_))));
}

void CudaKernels::Sum(const float* x, int64_t n, double* sum) {
  if (!Begin()) return;
  Keep(ZS_LAUNCH_STATUS(model_cuda::Sum(x, n, sum, StreamOf(device_))));
}

}  // namespace zeroshard
