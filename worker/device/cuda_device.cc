// CudaDevice: creation, memory, stream operations and events. The
// element-wise primitives are in cuda_primitives.cc.
#include "worker/device/cuda_device.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "worker/device/cuda_check.h"
#include "worker/device/cuda_kernels.h"
#include "worker/device/device_checks.h"
#include "worker/device/pool_headroom.h"

namespace zeroshard {
namespace {

using device_internal::CheckCount;

cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }

class CudaEvent final : public DeviceEvent {
 public:
  explicit CudaEvent(cudaEvent_t event) : event_(event) {}
  ~CudaEvent() override { cudaEventDestroy(event_); }
  DeviceKind kind() const override { return DeviceKind::kCuda; }
  cudaEvent_t event() const { return event_; }

  // Polls cudaEventQuery with a growing pause (2 us to 0.5 ms): short waits
  // return within microseconds, long ones cost little CPU, and the deadline
  // is checked between polls.
  absl::Status Wait(absl::Duration timeout) override {
    const absl::Time deadline = absl::Now() + timeout;
    absl::Duration pause = absl::Microseconds(2);
    while (true) {
      const cudaError_t e = QueryEvent(event_);
      if (e == cudaSuccess) return absl::OkStatus();
      if (e != cudaErrorNotReady) return CudaStatus(e, "cudaEventQuery", __FILE__, __LINE__);
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("cuda event not complete after ", absl::FormatDuration(timeout)));
      }
      absl::SleepFor(pause);
      pause = std::min(pause * 2, absl::Microseconds(500));
    }
  }

 private:
  const cudaEvent_t event_;
};

}  // namespace

CudaVisibility QueryCudaDevices() {
  CudaVisibility visibility;
  const cudaError_t e = cudaGetDeviceCount(&visibility.count);
  if (e != cudaSuccess) {
    visibility.count = 0;
    visibility.error = absl::StrCat(cudaGetErrorName(e), ": ", cudaGetErrorString(e));
  } else if (visibility.count == 0) {
    visibility.error = "0 devices";
  }
  return visibility;
}

absl::StatusOr<std::unique_ptr<CudaDevice>> CudaDevice::Create(int ordinal) {
  ZS_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal));
  cudaDeviceProp prop;
  ZS_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, ordinal));
  cudaStream_t stream = nullptr;
  // Non-blocking: the legacy default stream (other libraries' work) does not
  // serialise with ours.
  ZS_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // The stream-ordered pool keeps what is freed for the next Allocate, up to
  // the device less the headroom others need (pool_headroom.h).
  cudaMemPool_t pool = nullptr;
  uint64_t threshold = PoolReleaseThreshold(static_cast<int64_t>(prop.totalGlobalMem));
  void* partials = nullptr;
  cudaError_t e = cudaDeviceGetDefaultMemPool(&pool, ordinal);
  const char* what = "cudaDeviceGetDefaultMemPool";
  if (e == cudaSuccess) {
    e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
    what = "cudaMemPoolSetAttribute(release threshold)";
  }
  if (e == cudaSuccess) {
    e = cudaMalloc(&partials, device_internal::kSumSquaresBlocks * sizeof(double));
    what = "cudaMalloc(partials)";
  }
  if (e != cudaSuccess) {
    cudaStreamDestroy(stream);
    return CudaStatus(e, what, __FILE__, __LINE__);
  }
  return std::unique_ptr<CudaDevice>(new CudaDevice(ordinal,
                                                    absl::StrCat("cuda:", ordinal, " ", prop.name),
                                                    stream, static_cast<double*>(partials)));
}

CudaDevice::~CudaDevice() {
  cudaSetDevice(ordinal_);
  cudaStreamSynchronize(AsStream(stream_));  // Stream-ordered frees land.
  cudaFree(partials_);
  cudaStreamDestroy(AsStream(stream_));
}

absl::Status CudaDevice::MakeCurrent() const {
  ZS_CUDA_RETURN_IF_ERROR(cudaSetDevice(ordinal_));
  return absl::OkStatus();
}

template <typename Alloc>
absl::StatusOr<void*> CudaDevice::AllocateWith(const char* what, int64_t bytes, Alloc alloc) {
  ZS_RETURN_IF_ERROR(CheckCount(what, bytes));
  ZS_RETURN_IF_ERROR(MakeCurrent());
  void* ptr = nullptr;
  // cudaMalloc(0) gives null; one byte keeps "allocated" pointers distinct.
  const cudaError_t e = alloc(&ptr, static_cast<size_t>(std::max<int64_t>(bytes, 1)));
  if (e != cudaErrorMemoryAllocation) {
    ZS_CUDA_RETURN_IF_ERROR(e);
    return ptr;
  }
  cudaGetLastError();  // An allocation failure is not sticky; clear it.
  const absl::StatusOr<MemoryInfo> info = memory_info();
  return absl::ResourceExhaustedError(absl::StrCat(
      name_, ": ", what, " cannot allocate ", bytes, " bytes (",
      info.ok()
          ? absl::StrCat(info->free_bytes, " bytes free of ", info->total_bytes, " on the GPU")
          : std::string(info.status().message()),
      ")"));
}

template <typename Release>
void CudaDevice::FreeWith(const char* what, void* ptr, Release release) {
  if (ptr == nullptr) return;
  const absl::Status s = CudaStatus(release(ptr), what, __FILE__, __LINE__);
  if (!s.ok()) std::fprintf(stderr, "%s: %s\n", name_.c_str(), s.ToString().c_str());
}

// Stream-ordered allocation on the device's stream (cudaMallocAsync): a
// Free is ordered after the work already on the stream, so it never blocks
// the host and memory is not reused before that work is done. The pool keeps
// freed memory up to its release threshold; when an allocation fails the
// pool is trimmed once, after the stream drains, and the allocation retried.
// A failure of the drain or the trim is returned as itself, not as the
// allocation's.
absl::StatusOr<void*> CudaDevice::Allocate(int64_t bytes) {
  cudaStream_t stream = AsStream(stream_);
  const int ordinal = ordinal_;
  return AllocateWith("cudaMallocAsync", bytes, [stream, ordinal](void** p, size_t b) {
    if (const cudaError_t e = cudaMallocAsync(p, b, stream); e != cudaErrorMemoryAllocation) {
      return e;
    }
    (void)cudaGetLastError();  // Out of memory is not sticky; the retry decides.
    cudaMemPool_t pool = nullptr;
    cudaError_t e = cudaStreamSynchronize(stream);
    if (e == cudaSuccess) e = cudaDeviceGetDefaultMemPool(&pool, ordinal);
    if (e == cudaSuccess) e = cudaMemPoolTrimTo(pool, 0);
    return e == cudaSuccess ? cudaMallocAsync(p, b, stream) : e;
  });
}

void CudaDevice::Free(void* ptr) {
  cudaStream_t stream = AsStream(stream_);
  FreeWith("cudaFreeAsync", ptr, [stream](void* p) { return cudaFreeAsync(p, stream); });
}

absl::StatusOr<void*> CudaDevice::AllocatePinnedHost(int64_t bytes) {
  return AllocateWith("cudaMallocHost (pinned host)", bytes,
                      [](void** p, size_t b) { return cudaMallocHost(p, b); });
}

void CudaDevice::FreePinnedHost(void* ptr) {
  FreeWith("cudaFreeHost", ptr, [](void* p) { return cudaFreeHost(p); });
}

absl::Status CudaDevice::Memset(void* dst, int byte, int64_t bytes) {
  ZS_RETURN_IF_ERROR(CheckCount("Memset", bytes));
  if (bytes == 0) return absl::OkStatus();
  ZS_RETURN_IF_ERROR(MakeCurrent());
  ZS_CUDA_RETURN_IF_ERROR(
      cudaMemsetAsync(dst, byte, static_cast<size_t>(bytes), AsStream(stream_)));
  return absl::OkStatus();
}

absl::Status CudaDevice::Copy(void* dst, const void* src, int64_t bytes) {
  ZS_RETURN_IF_ERROR(CheckCount("Copy", bytes));
  if (bytes == 0 || dst == src) return absl::OkStatus();
  ZS_RETURN_IF_ERROR(MakeCurrent());
  ZS_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDefault, AsStream(stream_)));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DeviceEvent>> CudaDevice::RecordEvent() {
  ZS_RETURN_IF_ERROR(MakeCurrent());
  cudaEvent_t event = nullptr;
  ZS_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  auto owned = std::make_unique<CudaEvent>(event);  // Destroys it on every path.
  ZS_CUDA_RETURN_IF_ERROR(cudaEventRecord(event, AsStream(stream_)));
  return std::unique_ptr<DeviceEvent>(std::move(owned));
}

absl::Status CudaDevice::StreamWaitEvent(const DeviceEvent& event) {
  if (event.kind() == DeviceKind::kCpu) return absl::OkStatus();  // Already complete.
  ZS_RETURN_IF_ERROR(MakeCurrent());
  // Only CudaEvent reports kCuda.
  const cudaEvent_t e = static_cast<const CudaEvent&>(event).event();
  ZS_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(AsStream(stream_), e, 0));
  return absl::OkStatus();
}

absl::StatusOr<MemoryInfo> CudaDevice::memory_info() const {
  ZS_RETURN_IF_ERROR(MakeCurrent());
  size_t free_bytes = 0, total_bytes = 0;
  ZS_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  cudaMemPool_t pool = nullptr;
  uint64_t reserved = 0, used = 0;
  ZS_CUDA_RETURN_IF_ERROR(cudaDeviceGetDefaultMemPool(&pool, ordinal_));
  ZS_CUDA_RETURN_IF_ERROR(
      cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved));
  ZS_CUDA_RETURN_IF_ERROR(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used));
  const int64_t total = static_cast<int64_t>(total_bytes);
  const int64_t idle = reserved > used ? static_cast<int64_t>(reserved - used) : 0;
  return MemoryInfo{total, PoolAllocatableBytes(static_cast<int64_t>(free_bytes), idle,
                                                PoolHeadroomBytes(total))};
}

}  // namespace zeroshard
