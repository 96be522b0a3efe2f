// cuBLAS, opened at run time (dlopen) by the first CudaKernels::Create
// instead of linked: a worker that never computes on a GPU then never maps
// libcublas and libcublasLt (about 600 MB on disk). Linked, their relocated
// data alone added ~180 MB to the VmData and RSS of every worker, CPU ones
// included (measured on `zeroshard launch --model medium`), and pulled
// them into the CPU worker image.
//
// The API table holds the few entry points the model uses, typed from
// cublas_v2.h, resolved from libcublas.so.<CUBLAS_VER_MAJOR> (the major
// version this build's headers declare), else libcublas.so.
//
// Thread safety: Cublas() is safe from any thread; it loads once.
#pragma once

#include <cublas_v2.h>

#include "absl/status/statusor.h"

namespace zeroshard::model_cuda {

struct CublasApi {
  decltype(&cublasCreate_v2) Create = nullptr;
  decltype(&cublasDestroy_v2) Destroy = nullptr;
  decltype(&cublasSetStream_v2) SetStream = nullptr;
  decltype(&cublasSetMathMode) SetMathMode = nullptr;
  // The cublasComputeType_t overloads (the headers add cudaDataType ones).
  cublasStatus_t (*GemmEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int m, int n,
                           int k, const void* alpha, const void* A, cudaDataType, int lda,
                           const void* B, cudaDataType, int ldb, const void* beta, void* C,
                           cudaDataType, int ldc, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  cublasStatus_t (*GemmStridedBatchedEx)(cublasHandle_t, cublasOperation_t, cublasOperation_t,
                                         int m, int n, int k, const void* alpha, const void* A,
                                         cudaDataType, int lda, long long stride_a, const void* B,
                                         cudaDataType, int ldb, long long stride_b,
                                         const void* beta, void* C, cudaDataType, int ldc,
                                         long long stride_c, int batch_count, cublasComputeType_t,
                                         cublasGemmAlgo_t) = nullptr;
  decltype(&cublasGetStatusName) GetStatusName = nullptr;
  decltype(&cublasGetStatusString) GetStatusString = nullptr;
};

// The loaded API (the same table every call). FAILED_PRECONDITION naming
// the library and dlerror()'s reason when it cannot be opened or lacks an
// entry point; the failure is remembered.
absl::StatusOr<const CublasApi*> Cublas();

}  // namespace zeroshard::model_cuda
