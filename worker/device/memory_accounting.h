// Exact memory accounting by kind. Every buffer the engine holds is a
// DeviceBuffer (device_buffer.h), so MemoryAccountant's figures are the bytes
// actually allocated on the device (requested sizes; allocator rounding is
// not counted), current and peak, per rank. Exported in step reports as proto MemoryBytes
// (proto/zeroshard/v1/coordinator.proto).
//
// Thread safety: MemoryAccountant is safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "common/zero_memory.h"

namespace zeroshard {

enum class MemoryKind : int {
  kParams = 0,  // Compute-copy parameters (full or shard, by stage).
  kGrads,       // Gradients kept between hooks (full or shard, by stage).
  kOptimizer,   // fp32 master weights and AdamW m, v.
  kBuffers,     // Transient gather/scatter staging and fp32 views.
  kOffloaded,   // Offloaded state (host memory or NVMe files); not in the total.
  kCount
};

// Bytes by kind: common/zero_memory.h's MemoryByKind (as proto MemoryBytes),
// so measured figures and ZeroFormulaBytes compare field by field.
using MemoryBytes = MemoryByKind;

class MemoryAccountant {
 public:
  void Allocated(MemoryKind kind, int64_t bytes);
  void Freed(MemoryKind kind, int64_t bytes);
  MemoryBytes current() const;
  // Each kind's own peak since construction or ResetPeak (the kinds' peaks
  // need not coincide in time).
  MemoryBytes peak() const;
  // Peak of the sum of all kinds but kOffloaded.
  int64_t peak_total() const;
  // Sets each peak to the current value.
  void ResetPeak();

 private:
  mutable absl::Mutex mu_;
  int64_t current_[static_cast<int>(MemoryKind::kCount)] ABSL_GUARDED_BY(mu_) = {};
  int64_t peak_[static_cast<int>(MemoryKind::kCount)] ABSL_GUARDED_BY(mu_) = {};
  int64_t current_total_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t peak_total_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace zeroshard
