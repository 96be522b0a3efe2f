// ParamStore: stage-3 parameter offload to NVMe (--offload-params nvme;
// ZeRO-Infinity, Rajbhandari et al., SC'21, section 5: parameters streamed
// from NVMe ahead of their all-gather). Each unit's compute-dtype shard
// (S_u elements of the compute dtype, `bytes[u]` bytes) lives in one file
// under `dir` (BlockFile: O_DIRECT where possible, unlinked once open, never
// fsynced), AlignUp(bytes[u]) bytes each. A fixed set of host staging slots
// of AlignUp(max bytes) each, prefetch + 1 of them, holds the units being
// streamed: the resident parameter bytes are exactly those slots
// (ParamStagingBytes in common/memory_model.h), counted as kParams; the
// files are kOffloaded.
//
// How streaming works: the engine calls Prefetch with the units it will
// gather next (at most `prefetch` of them are read ahead, on a read thread),
// Acquire(u) right before u's all-gather (waiting for u's read, or reading
// it now when no slot holds it), and BeginWrite(u) / Commit(u) when the
// optimizer has written u's new shard (written back on a write thread).
// Invariants: at most one slot holds a unit; a slot is emptied only after
// its read and write finished; a file is read only when no slot holds its
// unit. So a read never overlaps a write of the same file, and a unit
// still in a slot is served from memory.
//
// Errors: INVALID_ARGUMENT for a unit out of range; FAILED_PRECONDITION for
// a dir that is not an existing writable directory; RESOURCE_EXHAUSTED when
// host memory runs out; the I/O's error (block_file.h); DEADLINE_EXCEEDED
// for I/O past `timeout`.
// Thread safety: one training thread calls everything.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "worker/device/memory_accounting.h"
#include "worker/offload/block_file.h"
#include "worker/offload/io_queue.h"
#include "worker/offload/staging_slot.h"

namespace zeroshard {

struct ParamStoreOptions {
  bool enabled = false;                        // The engine's switch (--offload-params nvme).
  std::string dir;                             // Where the unit files go (must exist).
  std::string file_prefix;                     // File names' prefix (rank, process).
  bool force_pread = false;                    // pread/pwrite even where io_uring works.
  int prefetch = 2;                            // Units read ahead (--offload-prefetch), 0..64.
  absl::Duration timeout = absl::Seconds(60);  // Per I/O wait.
};

class ParamStore {
 public:
  // `bytes[u]` is unit u's shard size in bytes; files start empty (write
  // every unit before acquiring it). `accountant` must outlive the store.
  static absl::StatusOr<std::unique_ptr<ParamStore>> Create(const ParamStoreOptions& options,
                                                            std::vector<int64_t> bytes,
                                                            MemoryAccountant* accountant);
  ~ParamStore();  // Waits for transfers (bounded by timeout), closes the files.
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

  int num_units() const { return static_cast<int>(bytes_.size()); }
  int64_t bytes(int u) const { return bytes_[u]; }
  int num_slots() const { return static_cast<int>(slots_.size()); }
  // Host bytes of the staging slots (the resident parameter bytes).
  int64_t StagingBytes() const { return slot_bytes_ * num_slots(); }

  // Reads ahead the first `prefetch` of `units` not held yet, in order, into
  // slots holding none of them (waiting for an evicted slot's write-back).
  absl::Status Prefetch(absl::Span<const int> units);
  // Unit u's shard, bytes(u) bytes of host memory, valid until the next
  // call on the store.
  absl::StatusOr<const void*> Acquire(int u);
  // Host memory for unit u's new shard (bytes(u) bytes), valid until
  // Commit(u), which writes it back in the background.
  absl::StatusOr<void*> BeginWrite(int u);
  absl::Status Commit(int u);
  // Waits for every outstanding write-back.
  absl::Status Flush();
  bool uses_uring() const { return reads_.uses_uring(); }

 private:
  struct Slot : StagingSlot {  // Reads on reads_, write-backs on writes_.
    int64_t used = 0;          // Last use, for least-recently-used eviction.
  };
  ParamStore(const ParamStoreOptions& options, std::vector<int64_t> bytes,
             MemoryAccountant* accountant);
  absl::Status Init();
  absl::Status CheckUnit(int u) const;
  Slot* Holding(int u);
  // An emptied, settled slot holding none of `keep`: an empty one first,
  // else the least recently used; null when every slot holds one of `keep`.
  absl::StatusOr<Slot*> FreeSlot(absl::Span<const int> keep);
  absl::Status Settle(Slot& s);
  void Touch(Slot& s) { s.used = ++clock_; }

  ParamStoreOptions options_;
  std::vector<int64_t> bytes_;
  MemoryAccountant* accountant_;
  std::vector<std::unique_ptr<BlockFile>> files_;
  std::vector<Slot> slots_;
  int64_t slot_bytes_ = 0;
  int64_t clock_ = 0;
  // Last: destroyed (joined) before the slots and files their jobs use.
  IoQueue reads_, writes_;
};

}  // namespace zeroshard
