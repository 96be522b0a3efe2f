// cuBLAS opened at run time (worker/model/cuda_blas.h): in a build with
// CUDA the library loads and every entry point resolves without a GPU, the
// same table comes back each call, and the worker binary does not link
// cuBLAS (a CPU worker must not map it).
#include "worker/model/cuda_blas.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace zeroshard::model_cuda {
namespace {

TEST(CudaBlasTest, LoadsEveryEntryPointOnce) {
  absl::StatusOr<const CublasApi*> api = Cublas();
  ASSERT_TRUE(api.ok()) << api.status();
  const CublasApi& a = **api;
  EXPECT_NE(a.Create, nullptr);
  EXPECT_NE(a.Destroy, nullptr);
  EXPECT_NE(a.SetStream, nullptr);
  EXPECT_NE(a.SetMathMode, nullptr);
  EXPECT_NE(a.GemmEx, nullptr);
  EXPECT_NE(a.GemmStridedBatchedEx, nullptr);
  ASSERT_NE(a.GetStatusName, nullptr);
  EXPECT_EQ(std::string(a.GetStatusName(CUBLAS_STATUS_ALLOC_FAILED)), "CUBLAS_STATUS_ALLOC_FAILED");
  EXPECT_EQ(*Cublas(), *api);
}

TEST(CudaBlasTest, TheWorkerDoesNotLinkCublas) {
  const char* bin = std::getenv("ZEROSHARD_BIN_DIR");
  ASSERT_NE(bin, nullptr);
  const std::string cmd = std::string("ldd ") + bin + "/zeroshard-worker";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  ASSERT_EQ(pclose(p), 0) << out;
  EXPECT_NE(out.find("libc.so"), std::string::npos) << out;
  EXPECT_EQ(out.find("libcublas"), std::string::npos) << out;
}

}  // namespace
}  // namespace zeroshard::model_cuda
