// Exact memory accounting by kind. Every buffer the engine holds is an
// AccountedBuffer, so MemoryAccountant's figures are the bytes actually
// allocated (requested sizes; allocator rounding is not counted), current
// and peak, per rank. Exported in step reports as proto MemoryBytes
// (proto/zeroshard/v1/coordinator.proto).
//
// Thread safety: MemoryAccountant is safe from any thread; one
// AccountedBuffer must be used by one thread at a time.
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
  // Peak of the sum of all kinds.
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

// A zero-initialised, 64-byte-aligned host buffer whose bytes are counted
// under one kind for as long as it holds memory. Movable, not copyable.
class AccountedBuffer {
 public:
  AccountedBuffer() = default;
  AccountedBuffer(MemoryAccountant* accountant, MemoryKind kind)
      : accountant_(accountant), kind_(kind) {}
  ~AccountedBuffer() { Free(); }
  AccountedBuffer(AccountedBuffer&& other) noexcept;
  AccountedBuffer& operator=(AccountedBuffer&& other) noexcept;
  AccountedBuffer(const AccountedBuffer&) = delete;
  AccountedBuffer& operator=(const AccountedBuffer&) = delete;

  // Replaces any held memory by `bytes` zeroed bytes.
  void Allocate(int64_t bytes);
  void Free();
  // Gives the memory up without freeing it (no longer counted), for memory a
  // backend may still write after a failed collective; returns it (or null).
  void* Abandon();
  bool allocated() const { return data_ != nullptr; }
  int64_t bytes() const { return bytes_; }
  MemoryKind kind() const { return kind_; }
  MemoryAccountant* accountant() const { return accountant_; }
  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  MemoryAccountant* accountant_ = nullptr;
  MemoryKind kind_ = MemoryKind::kBuffers;
  void* data_ = nullptr;
  int64_t bytes_ = 0;
};

}  // namespace zeroshard
