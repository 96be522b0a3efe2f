#include "common/infra/allocator.h"

#include <dlfcn.h>
#include <malloc.h>

#include <cstring>

namespace zeroshard {

const char* MallocName() {
  return dlsym(RTLD_DEFAULT, "tc_malloc") != nullptr ? "tcmalloc" : "glibc";
}

bool SetUpWorkerMalloc() {
  if (std::strcmp(MallocName(), "glibc") != 0) return true;
  return mallopt(M_ARENA_MAX, 1) == 1;
}

}  // namespace zeroshard
