// The staging slots both NVMe stores (nvme_store.cc for the optimizer
// state, param_store.h for stage-3 parameters) stream units through: aligned
// host memory holding one unit's bytes, and the read into it and the
// write-back out of it still in flight (IoQueue tickets; 0 = none).
// Thread safety: none; the store's training thread owns its slots.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "worker/offload/block_file.h"
#include "worker/offload/io_queue.h"

namespace zeroshard {

struct StagingSlot {
  AlignedBytes mem;
  int unit = -1;              // The unit whose bytes the slot holds, or -1.
  IoQueue::Ticket read = 0;   // Pending read into it.
  IoQueue::Ticket write = 0;  // Pending write-back out of it.
};

// Gives every slot `bytes` of zeroed aligned memory.
template <typename Slot>
absl::Status AllocateSlots(std::vector<Slot>& slots, int64_t bytes) {
  for (Slot& s : slots) {
    ZS_ASSIGN_OR_RETURN(s.mem, AllocateAligned(bytes));
    std::memset(s.mem.get(), 0, bytes);
  }
  return absl::OkStatus();
}

// The slot holding unit `u`, or null.
template <typename Slot>
Slot* SlotHolding(std::vector<Slot>& slots, int u) {
  for (Slot& s : slots) {
    if (s.unit == u) return &s;
  }
  return nullptr;
}

// Waits until the slot's read and write-back are done.
inline absl::Status SettleSlot(IoQueue& reads, IoQueue& writes, StagingSlot& s,
                               absl::Duration timeout) {
  ZS_RETURN_IF_ERROR(reads.Wait(s.read, timeout));
  ZS_RETURN_IF_ERROR(writes.Wait(s.write, timeout));
  s.read = s.write = 0;
  return absl::OkStatus();
}

// Waits for every slot's pending write-back (reset to 0 once it succeeded)
// and returns the first error.
template <typename Slot>
absl::Status WaitWriteBacks(IoQueue& writes, std::vector<Slot>& slots, absl::Duration timeout) {
  absl::Status first;
  for (Slot& s : slots) {
    absl::Status st = writes.Wait(s.write, timeout);
    if (st.ok()) s.write = 0;
    if (first.ok()) first = st;
  }
  return first;
}

}  // namespace zeroshard
