// The CPU Device: host memory, every operation synchronous on the calling
// thread, primitives from today's engine code (worker/device/convert.cc
// loops, AdamWCpu and SumSquaresCpu over `threads` threads). The reference
// the CUDA device is tested against.
#pragma once

#include <memory>
#include <string>

#include "worker/device/device.h"

namespace zeroshard {

class CpuDevice final : public Device {
 public:
  // threads: for AdamW and fp32 SumSquares; 0 = hardware concurrency, capped
  // at 16 (common/parallel_for.h).
  explicit CpuDevice(int threads = 0) : threads_(threads) {}

  DeviceKind kind() const override { return DeviceKind::kCpu; }
  const std::string& name() const override { return name_; }
  int ordinal() const override { return -1; }
  void* stream() const override { return nullptr; }

  absl::StatusOr<void*> Allocate(int64_t bytes) override;
  void Free(void* ptr) override;
  absl::StatusOr<void*> AllocatePinnedHost(int64_t bytes) override { return Allocate(bytes); }
  void FreePinnedHost(void* ptr) override { Free(ptr); }

  absl::Status Memset(void* dst, int byte, int64_t bytes) override;
  absl::Status Copy(void* dst, const void* src, int64_t bytes) override;
  absl::StatusOr<std::unique_ptr<DeviceEvent>> RecordEvent() override;
  absl::Status StreamWaitEvent(const DeviceEvent& event) override;

  absl::Status Convert(const void* src, DType src_dtype, void* dst, DType dst_dtype,
                       int64_t n) override;
  absl::Status AddInto(void* acc, DType acc_dtype, const void* x, DType x_dtype,
                       int64_t n) override;
  absl::Status Scale(void* x, DType dtype, float alpha, int64_t n) override;
  absl::Status SumSquaresAccumulate(const void* x, DType dtype, int64_t n, double* acc) override;
  absl::Status AdamW(const AdamWHyperparams& hp, int64_t step, float grad_scale,
                     const AdamWShard& shard) override;

  absl::StatusOr<MemoryInfo> memory_info() const override;

 private:
  const int threads_;
  const std::string name_ = "cpu";
};

// MemTotal and MemAvailable from a /proc/meminfo text (kB lines), in bytes.
// INVALID_ARGUMENT naming the missing field. Split out to be testable.
absl::StatusOr<MemoryInfo> ParseMeminfo(const std::string& text);

}  // namespace zeroshard
