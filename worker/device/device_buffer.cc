#include "worker/device/device_buffer.h"

#include <utility>

#include "common/status_macros.h"

namespace zeroshard {

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : device_(other.device_),
      accountant_(other.accountant_),
      kind_(other.kind_),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    Free();
    device_ = other.device_;
    accountant_ = other.accountant_;
    kind_ = other.kind_;
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

absl::Status DeviceBuffer::Allocate(int64_t bytes) {
  ZS_RETURN_IF_ERROR(AllocateUninitialized(bytes));
  if (absl::Status zeroed = device_->Memset(data_, 0, bytes); !zeroed.ok()) {
    Free();
    return zeroed;
  }
  return absl::OkStatus();
}

absl::Status DeviceBuffer::AllocateUninitialized(int64_t bytes) {
  ZS_CHECK(device_ != nullptr && accountant_ != nullptr);
  Free();
  ZS_ASSIGN_OR_RETURN(void* data, device_->Allocate(bytes));
  data_ = data;
  bytes_ = bytes;
  accountant_->Allocated(kind_, bytes_);
  return absl::OkStatus();
}

void* DeviceBuffer::Abandon() {
  if (data_ == nullptr) return nullptr;
  accountant_->Freed(kind_, bytes_);
  bytes_ = 0;
  return std::exchange(data_, nullptr);
}

void DeviceBuffer::Free() {
  if (data_ == nullptr) return;
  device_->Free(data_);
  data_ = nullptr;
  accountant_->Freed(kind_, bytes_);
  bytes_ = 0;
}

}  // namespace zeroshard
