// Row-major fp32 GEMMs on cuBLAS, which is column-major. A row-major [R, S]
// matrix with row stride S is, read column-major, its transpose [S, R] with
// leading dimension S; so row-major C = op(A) op(B) is column-major
// C^T = op(B)^T op(A)^T, and each call below hands cuBLAS B before A with
// M and N swapped. Included only by zeroshard_model_cuda's host sources.
//
// Compute: CUBLAS_COMPUTE_32F (IEEE fp32 throughout), or with `tf32` the
// inputs rounded to TF32 (10-bit mantissa) on tensor cores with fp32
// accumulation (CUBLAS_COMPUTE_32F_FAST_TF32), ~1e-3 relative. cuBLAS gives
// the same bits every run on one GPU model and stream (its documented
// reproducibility; no atomics mode is set).
#pragma once

#include <cublas_v2.h>

#include <cstdint>

#include "absl/status/status.h"

namespace zeroshard::model_cuda {

// OK for CUBLAS_STATUS_SUCCESS; else INTERNAL (RESOURCE_EXHAUSTED for
// CUBLAS_STATUS_ALLOC_FAILED, FAILED_PRECONDITION for NOT_INITIALIZED /
// ARCH_MISMATCH / NOT_SUPPORTED) with "file:line: expr: name (text)".
absl::Status CublasStatus(cublasStatus_t status, const char* expr, const char* file, int line);

#define ZS_CUBLAS_RETURN_IF_ERROR(expr)                                           \
  do {                                                                            \
    ::absl::Status zs_cublas_status_ =                                            \
        ::zeroshard::model_cuda::CublasStatus((expr), #expr, __FILE__, __LINE__); \
    if (!zs_cublas_status_.ok()) return zs_cublas_status_;                        \
  } while (0)

// C[M,N] = alpha * op(A) op(B) + beta * C, all row-major and contiguous:
// A is [M,K] ([K,M] when trans_a), B is [K,N] ([N,K] when trans_b).
struct GemmShape {
  bool trans_a = false;
  bool trans_b = false;
  int M = 0;
  int N = 0;
  int K = 0;
};

// `count` GEMMs of one shape, matrix i at A + i * a, B + i * b, C + i * c
// (strides in floats).
struct GemmBatch {
  int count = 1;
  int64_t a = 0;
  int64_t b = 0;
  int64_t c = 0;
};

// One GEMM (batch.count == 1) or a strided batch, enqueued on the handle's
// stream. Nothing is launched when M, N or count is 0.
absl::Status RowMajorGemm(cublasHandle_t handle, bool tf32, const GemmShape& shape, float alpha,
                          const float* A, const float* B, float beta, float* C,
                          const GemmBatch& batch = {});

// One GEMM as above with A and B in bf16 (CUDA_R_16BF, the layout of
// common/dtype.h's bf16) and C in fp32, accumulated in fp32 on tensor cores
// (CUBLAS_COMPUTE_32F): mixed precision's matmul.
absl::Status RowMajorGemmBf16(cublasHandle_t handle, const GemmShape& shape, float alpha,
                              const void* A, const void* B, float beta, float* C);

}  // namespace zeroshard::model_cuda
