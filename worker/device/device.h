// One Device per worker process: the CPU, or one CUDA device with one stream
// (DESIGN.md "Device layer"). The engine and the model allocate and compute
// only through it, so the same engine code runs on CPU and GPU. Backends:
// CpuDevice (cpu_device.h) and CudaDevice (cuda_device.h, built only where
// nvcc exists); CreateDevice (device_factory.h) picks one from a flag.
//
// Memory. Allocate gives device memory: host memory on CPU, stream-ordered
// cudaMallocAsync on CUDA. Every pointer given to a stream operation or a primitive must be
// memory the device can address (on CUDA: from Allocate, or pinned host
// memory through unified addressing, which is slow). AllocatePinnedHost gives
// host memory for data crossing to the host (cudaMallocHost on CUDA, so copies
// can be asynchronous). Sizes are in bytes; element counts `n` are int64 and
// elements are of the DType given beside each pointer.
//
// Ordering. On CUDA every stream operation and primitive is enqueued on the
// device's one stream and returns before it runs: operations complete in
// issue order, and the host must RecordEvent + Wait (or Synchronize) before
// it reads results or reuses inputs. On CPU they run synchronously on the
// calling thread, so the same engine code is correct on both.
//
// Errors. Bad arguments (negative sizes, unsupported dtypes) give
// INVALID_ARGUMENT; an exhausted allocator RESOURCE_EXHAUSTED naming the bytes
// asked and the bytes free; a wait past its deadline DEADLINE_EXCEEDED; a CUDA
// failure the status of its error with file:line (cuda_check.h). A CUDA
// kernel fault is sticky: it is reported by a later call, usually the next
// Wait.
//
// Thread safety: a Device is used by one thread at a time, like its stream;
// kind(), name(), ordinal(), stream() and memory_info() from any thread. A
// DeviceEvent may be waited on from any thread. Copy, RecordEvent and
// AllocatePinnedHost/FreePinnedHost may also be called from one second
// thread (the host-staged communicator's queue): they keep no state beyond
// the stream, and CUDA stream calls are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/dtype.h"
#include "common/status_macros.h"
#include "worker/optim/adamw.h"

namespace zeroshard {

enum class DeviceKind { kCpu, kCuda };
inline const char* DeviceKindName(DeviceKind kind) {
  return kind == DeviceKind::kCpu ? "cpu" : "cuda";
}

// Bytes of the device's memory (host RAM on CPU).
struct MemoryInfo {
  int64_t total_bytes = 0;
  // CUDA: what the device's allocations can take (cuda_device.h: driver free
  // plus the pool's idle memory, less the headroom others need); CPU:
  // MemAvailable.
  int64_t free_bytes = 0;
};

// A point in the device's stream: complete once everything issued before
// RecordEvent has finished. CPU events are complete when created.
class DeviceEvent {
 public:
  virtual ~DeviceEvent() = default;
  virtual DeviceKind kind() const = 0;
  // Blocks the calling thread until the event completes; polls with a
  // deadline, never waits unboundedly. DEADLINE_EXCEEDED after `timeout`;
  // a CUDA error raised by the work before the event is returned here.
  virtual absl::Status Wait(absl::Duration timeout) = 0;
};

class Device {
 public:
  virtual ~Device() = default;

  virtual DeviceKind kind() const = 0;
  // "cpu", or "cuda:<ordinal> <device name>", e.g. "cuda:0 NVIDIA H200".
  virtual const std::string& name() const = 0;
  // The CUDA device ordinal; -1 on CPU.
  virtual int ordinal() const = 0;
  // The cudaStream_t every operation is enqueued on (for the NCCL backend);
  // null on CPU.
  virtual void* stream() const = 0;

  // `bytes` >= 0 of uninitialised device memory, aligned to at least 64
  // bytes; 0 bytes gives a distinct non-null pointer. Free takes pointers
  // from Allocate of this device (null is a no-op). On CUDA both are
  // stream-ordered (cudaMallocAsync/cudaFreeAsync on the stream): Free
  // returns at once and the memory is reused only after the work enqueued
  // before it, and everything that stream waits on, is done. A CUDA error
  // in Free means the context is already broken, which the next operation
  // reports, so it is printed to stderr and not returned.
  virtual absl::StatusOr<void*> Allocate(int64_t bytes) = 0;
  virtual void Free(void* ptr) = 0;
  virtual absl::StatusOr<void*> AllocatePinnedHost(int64_t bytes) = 0;
  virtual void FreePinnedHost(void* ptr) = 0;

  // dst[0..bytes) = byte.
  virtual absl::Status Memset(void* dst, int byte, int64_t bytes) = 0;
  // Copies `bytes` between any two of host and device memory (CUDA:
  // cudaMemcpyDefault, the direction read from unified addresses). Regions
  // must not overlap. From pageable host memory CUDA may stage the copy and
  // return before or after it ran; only pinned memory makes it truly
  // asynchronous. Either way, order by an event before touching either side.
  virtual absl::Status Copy(void* dst, const void* src, int64_t bytes) = 0;
  virtual absl::StatusOr<std::unique_ptr<DeviceEvent>> RecordEvent() = 0;
  // Later stream work waits for `event` without blocking the host. CPU events
  // are accepted by every device (they are complete); a CUDA event on the CPU
  // device is INVALID_ARGUMENT: wait for it with DeviceEvent::Wait.
  virtual absl::Status StreamWaitEvent(const DeviceEvent& event) = 0;
  // Waits for everything issued so far: RecordEvent, then Wait(timeout).
  absl::Status Synchronize(absl::Duration timeout) {
    ZS_ASSIGN_OR_RETURN(std::unique_ptr<DeviceEvent> event, RecordEvent());
    return event->Wait(timeout);
  }

  // Element-wise primitives over n elements; dtypes are kFp32 or kBf16; bf16
  // rounds to nearest even exactly as common/dtype.h. Results are
  // bit-identical between CPU and CUDA (no fused multiply-add) except
  // SumSquaresAccumulate, whose summation order differs.
  //
  // dst[i] = src[i] converted; same dtype is a copy. src and dst must not
  // overlap unless they are equal with the same dtype (a no-op).
  virtual absl::Status Convert(const void* src, DType src_dtype, void* dst, DType dst_dtype,
                               int64_t n) = 0;
  // acc[i] += x[i]: summed in fp32 and rounded once into acc_dtype (as
  // worker/device/convert.cc's AddInto and AddFp32Into). No overlap.
  virtual absl::Status AddInto(void* acc, DType acc_dtype, const void* x, DType x_dtype,
                               int64_t n) = 0;
  // x[i] = x[i] * alpha, the product in fp32, rounded once into dtype.
  virtual absl::Status Scale(void* x, DType dtype, float alpha, int64_t n) = 0;
  // *acc += sum of x[i]^2, in double. `acc` is ONE double in device memory
  // (host memory on CPU). Deterministic: the same inputs give the same bits
  // every run (fixed-order partials, no floating-point atomics).
  virtual absl::Status SumSquaresAccumulate(const void* x, DType dtype, int64_t n, double* acc) = 0;
  // The fused AdamW of worker/optim/adamw.h on one shard of device memory;
  // bit-identical to AdamWReference. INVALID_ARGUMENT for step < 1, a
  // negative n or an unsupported compute dtype.
  virtual absl::Status AdamW(const AdamWHyperparams& hp, int64_t step, float grad_scale,
                             const AdamWShard& shard) = 0;

  virtual absl::StatusOr<MemoryInfo> memory_info() const = 0;
};

}  // namespace zeroshard
