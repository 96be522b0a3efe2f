#include "common/infra/allocator.h"

#include <dlfcn.h>
#include <malloc.h>

#include <cstring>

namespace zeroshard {

const char* MallocName() {
  return dlsym(RTLD_DEFAULT, "tc_malloc") != nullptr ? "tcmalloc" : "glibc";
}

bool SetUpWorkerMalloc() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;  // The sanitizer's malloc has no glibc arenas (its mallopt refuses).
#else
  if (std::strcmp(MallocName(), "glibc") != 0) return true;
  return mallopt(M_ARENA_MAX, 1) == 1;
#endif
}

}  // namespace zeroshard
