// Reading a checkpoint file's bytes by range with their XXH64, and reading
// a range of a file whose blocks carry recorded hashes (CheckpointFile
// .block_xxhash64, checkpoint.proto), verifying every block it touches.
// The coordinator serves DownloadRange this way (checkpoint_store_read.cc),
// and a rank on the coordinator's host reads the same files through
// descriptors the coordinator hands it (worker/checkpoint/local_reads.h), so
// both verify the same bytes against the same hashes.
//
// Units: offsets and lengths in fp32 elements (4 bytes) where named
// ElementRange, bytes elsewhere. Errors: ReadOnlyFile's (INTERNAL, DATA_LOSS
// for a short file), and whatever `check_block` returns for a mismatch.
// Thread safety: no shared state; one call per sink at a time.
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/formats/read_only_file.h"
#include "common/shard_plan.h"
#include "zeroshard/v1/checkpoint.pb.h"

namespace zeroshard {

// file.Read, returning XXH64 (seed 0) of the bytes read. From the page
// cache: read and hashed block by block (xxhash_copy.h), each block while
// still in the CPU's cache; from the disk (ReadsDirect): read whole, then
// hashed.
absl::StatusOr<uint64_t> PReadWithXxh64(const ReadOnlyFile& file, void* data, int64_t size,
                                        int64_t offset);

// Where a range's bytes go, a chunk at a time: `buffer(bytes)` gives the
// place to read the next chunk's bytes into, then `send(header)` passes the
// chunk on (header.offset/length in elements, xxhash64 of its bytes).
struct RangeSink {
  std::function<char*(size_t bytes)> buffer;
  std::function<absl::Status(const v1::RangeChunk& header)> send;
};

// No posix_fadvise(WILLNEED) ahead of the reads: on the 2-core VM it cost
// both restore paths a quarter of their speed and CPU besides, against the
// kernel's own readahead (bench/README.md, "Local reads").
// Reads elements `range` of `file` (whose block_bytes > 0), open as `in`,
// into `sink` in chunks of at most `chunk_elems`, each chunk's header
// carrying `step`. Every block the range touches is read whole and its
// XXH64 passed to `check_block(block index, hash)` before any of its bytes
// are sent; a non-OK answer ends the read with it. A chunk that is a whole
// block is read straight into the sink's buffer (one hash verifies it and
// travels with it); the parts of other blocks are copied out of the block.
absl::Status ReadVerifiedBlocks(const v1::CheckpointFile& file, const ReadOnlyFile& in,
                                ElementRange range, int64_t chunk_elems, int64_t step,
                                const RangeSink& sink,
                                const std::function<absl::Status(int64_t, uint64_t)>& check_block);

}  // namespace zeroshard
