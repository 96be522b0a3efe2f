// Row-major GEMMs on cuBLAS (the mapping is explained in cuda_gemm.h).
#include "worker/model/cuda_gemm.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/model/cuda_blas.h"

namespace zeroshard::model_cuda {

absl::Status CublasStatus(cublasStatus_t status, const char* expr, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  // A status comes from a cuBLAS call, so the API is loaded.
  const CublasApi& api = **Cublas();
  const std::string message =
      absl::StrCat(file, ":", line, ": ", expr, ": ", api.GetStatusName(status), " (",
                   api.GetStatusString(status), ")");
  switch (status) {
    case CUBLAS_STATUS_ALLOC_FAILED:
      return absl::ResourceExhaustedError(message);
    case CUBLAS_STATUS_NOT_INITIALIZED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

namespace {

// Row-major C = alpha op(A) op(B) + beta C with A and B of `in` type and C
// fp32, computed as `compute`: one GEMM or a strided batch.
absl::Status Gemm(cublasHandle_t handle, const GemmShape& s, float alpha, const void* A,
                  const void* B, cudaDataType in, cublasComputeType_t compute, float beta, float* C,
                  const GemmBatch& batch) {
  if (s.M <= 0 || s.N <= 0 || batch.count <= 0) return absl::OkStatus();
  // Column-major C^T [N, M] = op(B)^T [N, K] * op(A)^T [K, M]: cuBLAS's first
  // operand is B. The row stride of each stored matrix is its leading
  // dimension (at least 1: cuBLAS refuses 0 even when K is 0).
  const cublasOperation_t op_b = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ldb = std::max(1, s.trans_b ? s.K : s.N);
  const int lda = std::max(1, s.trans_a ? s.M : s.K);
  const int ldc = s.N;
  ZS_ASSIGN_OR_RETURN(const CublasApi* api, Cublas());
  if (batch.count == 1) {
    ZS_CUBLAS_RETURN_IF_ERROR(api->GemmEx(handle, op_b, op_a, s.N, s.M, s.K, &alpha, B, in, ldb, A,
                                          in, lda, &beta, C, CUDA_R_32F, ldc, compute,
                                          CUBLAS_GEMM_DEFAULT));
    return absl::OkStatus();
  }
  ZS_CUBLAS_RETURN_IF_ERROR(api->GemmStridedBatchedEx(
      handle, op_b, op_a, s.N, s.M, s.K, &alpha, B, in, ldb, batch.b, A, in, lda, batch.a, &beta, C,
      CUDA_R_32F, ldc, batch.c, batch.count, compute, CUBLAS_GEMM_DEFAULT));
  return absl::OkStatus();
}

}  // namespace

absl::Status RowMajorGemm(cublasHandle_t handle, bool tf32, const GemmShape& s, float alpha,
                          const float* A, const float* B, float beta, float* C,
                          const GemmBatch& batch) {
  return Gemm(handle, s, alpha, A, B, CUDA_R_32F,
              tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, beta, C, batch);
}

absl::Status RowMajorGemmBf16(cublasHandle_t handle, const GemmShape& s, float alpha, const void* A,
                              const void* B, float beta, float* C) {
  return Gemm(handle, s, alpha, A, B, CUDA_R_16BF, CUBLAS_COMPUTE_32F, beta, C, GemmBatch{});
}

}  // namespace zeroshard::model_cuda
