// Host memory aligned for O_DIRECT I/O: buffers, file offsets and sizes of
// direct reads and writes are multiples of kBlockBytes (4096, the page size
// and a multiple of every disk's logical block). Used by the NVMe offload
// store (worker/offload/block_file.h) and by ReadOnlyFile's direct reads.
// Thread safety: free functions, no shared state.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace zeroshard {

inline constexpr int64_t kBlockBytes = 4096;
// `bytes` rounded up to a multiple of kBlockBytes.
inline int64_t AlignUp(int64_t bytes) {
  return (bytes + kBlockBytes - 1) / kBlockBytes * kBlockBytes;
}
// `bytes` rounded down to a multiple of kBlockBytes.
inline int64_t AlignDown(int64_t bytes) { return bytes / kBlockBytes * kBlockBytes; }

// Aligned host memory (kBlockBytes); freed by the deleter.
struct AlignedFree {
  void operator()(void* p) const;
};
using AlignedBytes = std::unique_ptr<uint8_t, AlignedFree>;
// AlignUp(bytes) bytes (at least one block), uninitialised.
// RESOURCE_EXHAUSTED naming the bytes when the allocation fails.
absl::StatusOr<AlignedBytes> AllocateAligned(int64_t bytes);

}  // namespace zeroshard
