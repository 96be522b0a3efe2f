// The CUDA Device (target zeroshard_device_cuda, built only where nvcc
// exists): one GPU and one non-blocking stream, every operation enqueued on
// it. Primitives are the kernels of cuda_kernels.cu and AdamWCuda
// (worker/optim/adamw_cuda.h), bit-identical to the CPU device except for the
// summation order of SumSquaresAccumulate.
//
// No CUDA types appear here, so the CPU-only factory can include it. Every
// method first makes the device current on the calling thread
// (cudaSetDevice), because the runtime's current device is per thread and the
// engine may call from more than one.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "worker/device/device.h"

namespace zeroshard {

// What cudaGetDeviceCount reports. Without a GPU or driver it returns an
// error (cudaErrorInsufficientDriver, cudaErrorNoDevice), not a crash: count
// is then 0 and `error` its name and text. CUDA_VISIBLE_DEVICES applies.
struct CudaVisibility {
  int count = 0;
  std::string error;
};
CudaVisibility QueryCudaDevices();

class CudaDevice final : public Device {
 public:
  // Makes `ordinal` current, creates the stream and the sum-of-squares
  // scratch. FAILED_PRECONDITION when the device cannot be used.
  static absl::StatusOr<std::unique_ptr<CudaDevice>> Create(int ordinal);
  ~CudaDevice() override;

  DeviceKind kind() const override { return DeviceKind::kCuda; }
  const std::string& name() const override { return name_; }
  int ordinal() const override { return ordinal_; }
  void* stream() const override { return stream_; }

  absl::StatusOr<void*> Allocate(int64_t bytes) override;
  void Free(void* ptr) override;
  absl::StatusOr<void*> AllocatePinnedHost(int64_t bytes) override;
  void FreePinnedHost(void* ptr) override;

  absl::Status Memset(void* dst, int byte, int64_t bytes) override;
  absl::Status Copy(void* dst, const void* src, int64_t bytes) override;
  absl::StatusOr<std::unique_ptr<DeviceEvent>> RecordEvent() override;
  absl::Status StreamWaitEvent(const DeviceEvent& event) override;

  // cuda_primitives.cc.
  absl::Status Convert(const void* src, DType src_dtype, void* dst, DType dst_dtype,
                       int64_t n) override;
  absl::Status AddInto(void* acc, DType acc_dtype, const void* x, DType x_dtype,
                       int64_t n) override;
  absl::Status Scale(void* x, DType dtype, float alpha, int64_t n) override;
  // The partial sums go through one scratch buffer of this device; calls are
  // ordered by the stream, so they never share it at the same time.
  absl::Status SumSquaresAccumulate(const void* x, DType dtype, int64_t n, double* acc) override;
  absl::Status AdamW(const AdamWHyperparams& hp, int64_t step, float grad_scale,
                     const AdamWShard& shard) override;

  // free_bytes: what Allocate can take while leaving the headroom of
  // pool_headroom.h to cuBLAS, NCCL and the context: cudaMemGetInfo's free
  // memory plus what the stream-ordered pool holds unused (freed by this
  // process, kept for the next Allocate, which takes it first and trims the
  // pool before failing), less the headroom. An earlier generation's freed
  // engine and model buffers count as free. Errors of the pool queries are
  // returned, not ignored.
  absl::StatusOr<MemoryInfo> memory_info() const override;

 private:
  CudaDevice(int ordinal, std::string name, void* stream, double* partials)
      : ordinal_(ordinal), name_(std::move(name)), stream_(stream), partials_(partials) {}
  // cudaSetDevice(ordinal_) as a Status.
  absl::Status MakeCurrent() const;
  // `bytes` through `alloc` (cudaMallocAsync or cudaMallocHost, a callable);
  // RESOURCE_EXHAUSTED with the device's free memory when it runs out.
  template <typename Alloc>
  absl::StatusOr<void*> AllocateWith(const char* what, int64_t bytes, Alloc alloc);
  // `release` (cudaFreeAsync or cudaFreeHost) of ptr; errors printed (device.h).
  template <typename Release>
  void FreeWith(const char* what, void* ptr, Release release);

  const int ordinal_;
  const std::string name_;
  void* const stream_;      // cudaStream_t.
  double* const partials_;  // kSumSquaresBlocks doubles of device memory.
};

}  // namespace zeroshard
