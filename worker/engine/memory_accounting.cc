#include "worker/engine/memory_accounting.h"

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

AccountedBuffer::AccountedBuffer(AccountedBuffer&& other) noexcept
    : accountant_(other.accountant_), kind_(other.kind_),
      data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

AccountedBuffer& AccountedBuffer::operator=(AccountedBuffer&& other) noexcept {
  if (this != &other) {
    Free();
    accountant_ = other.accountant_;
    kind_ = other.kind_;
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void AccountedBuffer::Allocate(int64_t bytes) {
  ZS_CHECK(accountant_ != nullptr && bytes >= 0);
  Free();
  constexpr size_t kAlign = 64;
  const size_t rounded = (static_cast<size_t>(bytes) + kAlign - 1) / kAlign * kAlign;
  data_ = std::aligned_alloc(kAlign, std::max<size_t>(rounded, kAlign));
  ZS_CHECK(data_ != nullptr);
  std::memset(data_, 0, std::max<size_t>(rounded, kAlign));
  bytes_ = bytes;
  accountant_->Allocated(kind_, bytes_);
}

void* AccountedBuffer::Abandon() {
  if (data_ == nullptr) return nullptr;
  accountant_->Freed(kind_, bytes_);
  bytes_ = 0;
  return std::exchange(data_, nullptr);
}

void AccountedBuffer::Free() {
  if (data_ == nullptr) return;
  std::free(data_);
  data_ = nullptr;
  accountant_->Freed(kind_, bytes_);
  bytes_ = 0;
}

}  // namespace zeroshard
