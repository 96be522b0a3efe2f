#include "worker/model/cuda_blas.h"

#include <dlfcn.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace zeroshard::model_cuda {
namespace {

struct Loaded {
  CublasApi api;
  absl::Status status;
};

// `*fn` = the symbol `name` of `lib`; false when it is missing.
template <typename Fn>
bool Resolve(void* lib, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(dlsym(lib, name));
  return *fn != nullptr;
}

Loaded Load() {
  Loaded out;
  const std::string versioned = absl::StrCat("libcublas.so.", CUBLAS_VER_MAJOR);
  void* lib = dlopen(versioned.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) lib = dlopen("libcublas.so", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    out.status = absl::FailedPreconditionError(absl::StrCat(
        "cuBLAS: cannot open ", versioned, " or libcublas.so: ", why != nullptr ? why : "?"));
    return out;
  }
  CublasApi& a = out.api;
  // The first entry point missing, if any. The _v2 names are what
  // cublas_v2.h's macros call.
  const char* missing = nullptr;
  auto resolve = [&](const char* name, auto* fn) {
    if (!Resolve(lib, name, fn) && missing == nullptr) missing = name;
  };
  resolve("cublasCreate_v2", &a.Create);
  resolve("cublasDestroy_v2", &a.Destroy);
  resolve("cublasSetStream_v2", &a.SetStream);
  resolve("cublasSetMathMode", &a.SetMathMode);
  resolve("cublasGemmEx", &a.GemmEx);
  resolve("cublasGemmStridedBatchedEx", &a.GemmStridedBatchedEx);
  resolve("cublasGetStatusName", &a.GetStatusName);
  resolve("cublasGetStatusString", &a.GetStatusString);
  if (missing != nullptr) {
    out.status =
        absl::FailedPreconditionError(absl::StrCat("cuBLAS: ", versioned, " has no ", missing));
  }
  return out;  // The library stays open for the process's life.
}

}  // namespace

absl::StatusOr<const CublasApi*> Cublas() {
  static const Loaded* loaded = new Loaded(Load());
  if (!loaded->status.ok()) return loaded->status;
  return &loaded->api;
}

}  // namespace zeroshard::model_cuda
