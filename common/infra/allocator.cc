#include "common/infra/allocator.h"

#include <dlfcn.h>

namespace zeroshard {

const char* MallocName() {
  return dlsym(RTLD_DEFAULT, "tc_malloc") != nullptr ? "tcmalloc" : "glibc";
}

}  // namespace zeroshard
