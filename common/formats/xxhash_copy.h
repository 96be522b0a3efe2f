// XXH64 (seed 0) of a buffer computed while it is copied: the copy and the
// hash go block by block, so each block is hashed while it is still in the
// core's cache instead of being read from memory a second time. Checkpoint
// chunks (~1 MiB) are larger than a core's L2 here.
#pragma once

#include <xxhash.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

#include "common/status_macros.h"

namespace zeroshard {

// Block size: fits a core's L1/L2 with room for the destination.
inline constexpr size_t kXxhashCopyBlockBytes = 128 << 10;

// XXH64 (seed 0) over bytes given piece by piece (xxhash's streaming
// state, owned). One thread at a time.
class Xxh64Stream {
 public:
  Xxh64Stream() : state_(XXH64_createState(), &XXH64_freeState) {
    ZS_CHECK(state_ != nullptr);
    XXH64_reset(state_.get(), 0);
  }
  void Update(const void* data, size_t size) { XXH64_update(state_.get(), data, size); }
  uint64_t Digest() const { return static_cast<uint64_t>(XXH64_digest(state_.get())); }

 private:
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state_;
};

// Copies `size` bytes from `src` to `dst` (not overlapping), adding them to
// `hash` block by block. Thread-safe for distinct `hash` objects.
inline void CopyIntoXxh64(void* dst, const void* src, size_t size, Xxh64Stream* hash) {
  auto* d = static_cast<char*>(dst);
  const auto* s = static_cast<const char*>(src);
  for (size_t done = 0; done < size;) {
    const size_t n = std::min(kXxhashCopyBlockBytes, size - done);
    std::memcpy(d + done, s + done, n);
    hash->Update(d + done, n);
    done += n;
  }
}

// Copies `size` bytes from `src` to `dst` (not overlapping) and returns
// XXH64(src, size, 0). Thread-safe.
inline uint64_t CopyWithXxh64(void* dst, const void* src, size_t size) {
  Xxh64Stream hash;
  CopyIntoXxh64(dst, src, size, &hash);
  return hash.Digest();
}

}  // namespace zeroshard
