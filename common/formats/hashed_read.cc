#include "common/formats/hashed_read.h"

#include <xxhash.h>

#include <algorithm>
#include <vector>

#include "common/formats/xxhash_copy.h"
#include "common/status_macros.h"

namespace zeroshard {

absl::StatusOr<uint64_t> PReadWithXxh64(const ReadOnlyFile& file, void* data, int64_t size,
                                        int64_t offset) {
  if (file.ReadsDirect(size, offset)) {  // From the disk: no cache to keep it in.
    ZS_RETURN_IF_ERROR(file.ReadUncached(data, size, offset));
    return XXH64(data, static_cast<size_t>(size), 0);
  }
  Xxh64Stream hash;
  char* p = static_cast<char*>(data);
  for (int64_t done = 0; done < size;) {
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(kXxhashCopyBlockBytes), size - done);
    ZS_RETURN_IF_ERROR(file.ReadCached(p + done, n, offset + done));
    hash.Update(p + done, static_cast<size_t>(n));
    done += n;
  }
  return hash.Digest();
}

absl::Status ReadVerifiedBlocks(const v1::CheckpointFile& file, const ReadOnlyFile& in,
                                ElementRange range, int64_t chunk_elems, int64_t step,
                                const RangeSink& sink,
                                const std::function<absl::Status(int64_t, uint64_t)>& check_block) {
  const int64_t block_elems = file.block_bytes() / 4;
  std::vector<char> whole_block;  // For chunks that cover part of a block.
  v1::RangeChunk chunk;
  chunk.set_step(step);
  auto send = [&](int64_t offset, int64_t length, uint64_t hash) {
    chunk.set_offset(offset);
    chunk.set_length(length);
    chunk.set_xxhash64(hash);
    return sink.send(chunk);
  };
  for (int64_t b = range.offset / block_elems; b * block_elems < range.end(); ++b) {
    const ElementRange block{b * block_elems,
                             std::min(block_elems, file.numel() - b * block_elems)};
    const int64_t first = std::max(range.offset, block.offset);
    const int64_t last = std::min(range.end(), block.end());
    if (first == block.offset && last == block.end() && block.length <= chunk_elems) {
      // The chunk is the block: one hash verifies the disk's bytes and
      // travels with them.
      const int64_t bytes = block.length * 4;
      ZS_ASSIGN_OR_RETURN(
          const uint64_t hash,
          PReadWithXxh64(in, sink.buffer(static_cast<size_t>(bytes)), bytes, block.offset * 4));
      ZS_RETURN_IF_ERROR(check_block(b, hash));
      ZS_RETURN_IF_ERROR(send(block.offset, block.length, hash));
      continue;
    }
    // The range covers part of the block, or chunks are smaller than a
    // block: the block is read whole to be verified, then sent from memory.
    whole_block.resize(static_cast<size_t>(block.length * 4));
    ZS_ASSIGN_OR_RETURN(const uint64_t hash,
                        PReadWithXxh64(in, whole_block.data(), block.length * 4, block.offset * 4));
    ZS_RETURN_IF_ERROR(check_block(b, hash));
    for (int64_t off = first; off < last; off += chunk_elems) {
      const int64_t n = std::min(chunk_elems, last - off);
      const size_t bytes = static_cast<size_t>(n * 4);
      ZS_RETURN_IF_ERROR(send(
          off, n,
          CopyWithXxh64(sink.buffer(bytes), whole_block.data() + (off - block.offset) * 4, bytes)));
    }
  }
  return absl::OkStatus();
}

}  // namespace zeroshard
