#include "common/formats/aligned_bytes.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace zeroshard {

void AlignedFree::operator()(void* p) const { std::free(p); }

absl::StatusOr<AlignedBytes> AllocateAligned(int64_t bytes) {
  void* p =
      std::aligned_alloc(kBlockBytes, static_cast<size_t>(AlignUp(std::max<int64_t>(bytes, 1))));
  if (p == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " aligned host bytes"));
  }
  return AlignedBytes(static_cast<uint8_t*>(p));
}

}  // namespace zeroshard
