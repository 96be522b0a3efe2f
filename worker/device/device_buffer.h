// DeviceBuffer: a buffer on a Device, accounted in a MemoryAccountant
// (memory_accounting.h). Its bytes are counted under one MemoryKind for as long as it holds
// memory, so the engine's MemoryAccountant figures stay exact when the
// buffers move to the GPU. Allocate returns a Status: device memory runs out
// in practice (RESOURCE_EXHAUSTED from Device::Allocate).
//
// [Note: device buffer ordering] Allocate zero-fills with Device::Memset on
// the device's stream: on CUDA the zeros are ordered before later stream work
// but not before host reads through another path. Free goes through
// Device::Free, which on CUDA waits for work still using the memory.
//
// Thread safety: one DeviceBuffer is used by one thread at a time.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "worker/device/device.h"
#include "worker/device/memory_accounting.h"

namespace zeroshard {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(Device* device, MemoryAccountant* accountant, MemoryKind kind)
      : device_(device), accountant_(accountant), kind_(kind) {}
  ~DeviceBuffer() { Free(); }
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Replaces any held memory by `bytes` zeroed bytes. On error the buffer
  // holds nothing.
  absl::Status Allocate(int64_t bytes);
  // As Allocate, with the contents undefined: for a buffer that a collective
  // or a copy overwrites whole before anything reads it (no memset pass).
  absl::Status AllocateUninitialized(int64_t bytes);
  void Free();
  // Gives the memory up without freeing it (no longer counted), for memory a
  // backend may still write after a failed collective; returns it (or null).
  // The caller may hand it to Device::Free once nothing writes it.
  void* Abandon();
  bool allocated() const { return data_ != nullptr; }
  int64_t bytes() const { return bytes_; }
  MemoryKind kind() const { return kind_; }
  MemoryAccountant* accountant() const { return accountant_; }
  Device* device() const { return device_; }
  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }

 private:
  Device* device_ = nullptr;
  MemoryAccountant* accountant_ = nullptr;
  MemoryKind kind_ = MemoryKind::kBuffers;
  void* data_ = nullptr;
  int64_t bytes_ = 0;
};

}  // namespace zeroshard
