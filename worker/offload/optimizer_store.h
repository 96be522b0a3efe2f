// OptimizerStore: where one rank's fp32 optimizer state (master weights,
// AdamW m and v) lives, per unit, behind one interface, so the engine's
// update, checkpoint, export and resharding paths do not depend on it.
// Stores (CreateOptimizerStore):
//   kDevice: DeviceBuffers in device memory (kOptimizer). Today's engine.
//   kHost:   host memory (pinned on a CUDA device), counted as kOffloaded.
//            On the CPU device this is the same RAM, only accounted apart.
//   kNvme:   one file per unit under `dir` (block_file.h), counted as
//            kOffloaded; kStagingSlots host staging slots (kOptimizer) hold
//            the units being streamed.
//
// How streaming works (kNvme): the engine calls Update(u, next) for units in
// order. Update waits for u's slot (read ahead by the previous call, or
// still held from its last write), issues the read of `next` into a free
// slot, runs the fused AdamW on the slot, and issues u's write-back. So while
// u is updated, `next` is being read and u-1 written back: three slots. A
// read and a write run on separate I/O threads (io_queue.h). A unit's file
// is read only after its last write-back finished (its slot keeps it until
// then and is reused instead of reading).
//
// Resident optimizer bytes: kDevice 12 * sum(n_u); kHost on a CUDA device
// and kNvme: only StagingBytes() (kNvme: 3 slots * 3 * AlignUp(4 max_n);
// plus, on a CUDA device, 8 max_n pinned bytes for the gradient and the new
// compute shard, counted as kBuffers).
//
// Update on a CUDA device with kHost/kNvme (ZeRO-Offload): the fp32
// gradient shard is copied to pinned host memory, AdamWCpu (bit-identical to
// the CUDA kernel) runs there, and the new compute-dtype shard is copied back
// into `out` before Update returns, so the engine's all-gather that follows
// sees it.
//
// Pointers: `grad` and `out` are device memory (host memory on the CPU
// device); Load and Read take host memory. Errors: INVALID_ARGUMENT for a
// unit or range out of bounds; the I/O's error (block_file.h) or a device
// error otherwise; DEADLINE_EXCEEDED for I/O past `timeout`.
// Thread safety: one training thread calls everything.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/dtype.h"
#include "worker/device/device.h"
#include "worker/device/memory_accounting.h"
#include "worker/optim/adamw.h"

namespace zeroshard {

enum class OffloadTarget { kDevice, kHost, kNvme };

struct OptimizerStoreOptions {
  OffloadTarget target = OffloadTarget::kDevice;
  std::string dir;           // kNvme: where the unit files go (must exist).
  std::string file_prefix;   // kNvme: file names' prefix (rank, process).
  bool force_pread = false;  // kNvme: pread/pwrite even where io_uring works.
  int cpu_threads = 0;       // Host AdamWCpu threads on a CUDA device; 0 = hardware.
  absl::Duration timeout = absl::Seconds(60);  // Per I/O or device wait.
};

// Unit u's state for a moment: n fp32 elements each (device memory for
// kDevice, host memory otherwise).
struct UnitState {
  float* master = nullptr;
  float* m = nullptr;
  float* v = nullptr;
  int64_t n = 0;
};

inline constexpr int kStagingSlots = 3;

class OptimizerStore {
 public:
  virtual ~OptimizerStore() = default;
  virtual OffloadTarget target() const = 0;
  int num_units() const { return static_cast<int>(sizes_.size()); }
  int64_t size(int u) const { return sizes_[u]; }
  const std::vector<int64_t>& sizes() const { return sizes_; }

  // Replaces unit u's state by host arrays of size(u) floats; null m or v
  // (or master) means zeros; an array that is the store's own (Resident(u),
  // written in place) is kept as it is. Returns once the caller's arrays
  // are read.
  virtual absl::Status Load(int u, const float* master, const float* m, const float* v) = 0;
  // Copies elements [offset, offset + length) of unit u into host memory;
  // a null destination is skipped. Returns once they have landed.
  virtual absl::Status Read(int u, int64_t offset, int64_t length, float* master, float* m,
                            float* v) = 0;
  // The fused AdamW (adamw.h) on unit u with the fp32 gradient `grad`
  // (size(u) elements) writing `out` (size(u) of `dtype`, or null); `next`
  // is the unit updated after this one (-1: none), read ahead.
  virtual absl::Status Update(int u, int next, const AdamWHyperparams& hp, int64_t step,
                              float grad_scale, const float* grad, void* out, DType dtype) = 0;
  // Waits for outstanding write-backs (Read and Load do this themselves).
  virtual absl::Status Flush() = 0;
  // kDevice: the state in device memory; otherwise n = 0 and null pointers.
  virtual UnitState Resident(int /*u*/) const { return {nullptr, nullptr, nullptr, 0}; }
  // Resident bytes the store holds besides kDevice's state (see above).
  virtual int64_t StagingBytes() const { return 0; }

 protected:
  explicit OptimizerStore(std::vector<int64_t> sizes) : sizes_(std::move(sizes)) {}
  absl::Status CheckUnit(int u) const;
  absl::Status CheckRange(int u, int64_t offset, int64_t length) const;

 private:
  std::vector<int64_t> sizes_;
};

// `sizes[u]` elements per unit, zero-initialised; `device` and `accountant`
// must outlive the store. `masters` (kDevice only; empty: the store
// allocates its own): unit u's fp32 master lives at masters[u], size(u)
// floats of device memory the caller owns, counts and keeps alive (the
// engine's compute copy under fp32 compute, which Update then writes in
// place: pass `out` null). Errors: INVALID_ARGUMENT for `masters` with
// another target or of another length; FAILED_PRECONDITION for kNvme
// without an existing writable dir; RESOURCE_EXHAUSTED when memory runs
// out; I/O errors.
absl::StatusOr<std::unique_ptr<OptimizerStore>> CreateOptimizerStore(
    const OptimizerStoreOptions& options, std::vector<int64_t> sizes, Device* device,
    MemoryAccountant* accountant, std::vector<float*> masters = {});

// The bound on StagingBytes for these sizes (for the engine's fit check).
int64_t StagingBytesFor(const OptimizerStoreOptions& options, const std::vector<int64_t>& sizes,
                        DeviceKind device);

}  // namespace zeroshard
