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
  current_total_ += bytes;
  peak_total_ = std::max(peak_total_, current_total_);
}

void MemoryAccountant::Freed(MemoryKind kind, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  const int k = static_cast<int>(kind);
  current_[k] -= bytes;
  current_total_ -= bytes;
  ZS_CHECK(current_[k] >= 0);
}

namespace {
MemoryBytes FromArray(const int64_t* a) {
  return {a[static_cast<int>(MemoryKind::kParams)], a[static_cast<int>(MemoryKind::kGrads)],
          a[static_cast<int>(MemoryKind::kOptimizer)], a[static_cast<int>(MemoryKind::kBuffers)]};
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
