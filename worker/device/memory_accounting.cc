#include "worker/device/memory_accounting.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "common/status_macros.h"

namespace zeroshard {

void MemoryAccountant::Allocated(MemoryKind kind, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  const int k = static_cast<int>(kind);
  current_[k] += bytes;
  peak_[k] = std::max(peak_[k], current_[k]);
  if (kind == MemoryKind::kOffloaded) return;  // Not device memory.
  current_total_ += bytes;
  peak_total_ = std::max(peak_total_, current_total_);
}

void MemoryAccountant::Freed(MemoryKind kind, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  const int k = static_cast<int>(kind);
  current_[k] -= bytes;
  ZS_CHECK(current_[k] >= 0);
  if (kind != MemoryKind::kOffloaded) current_total_ -= bytes;
}

namespace {
MemoryBytes FromArray(const int64_t* a) {
  MemoryBytes m;
  m.params = a[static_cast<int>(MemoryKind::kParams)];
  m.grads = a[static_cast<int>(MemoryKind::kGrads)];
  m.optimizer = a[static_cast<int>(MemoryKind::kOptimizer)];
  m.buffers = a[static_cast<int>(MemoryKind::kBuffers)];
  m.offloaded = a[static_cast<int>(MemoryKind::kOffloaded)];
  return m;
}
}  // namespace

MemoryBytes MemoryAccountant::current() const {
  absl::MutexLock lock(&mu_);
  return FromArray(current_);
}

MemoryBytes MemoryAccountant::peak() const {
  absl::MutexLock lock(&mu_);
  return FromArray(peak_);
}

int64_t MemoryAccountant::peak_total() const {
  absl::MutexLock lock(&mu_);
  return peak_total_;
}

void MemoryAccountant::ResetPeak() {
  absl::MutexLock lock(&mu_);
  std::copy(std::begin(current_), std::end(current_), std::begin(peak_));
  peak_total_ = current_total_;
}

}  // namespace zeroshard
