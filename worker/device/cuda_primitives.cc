// CudaDevice's element-wise primitives: check arguments as the CPU device
// does (device_checks.h), then enqueue a kernel on the device's stream.
#include "worker/device/cuda_check.h"
#include "worker/device/cuda_device.h"
#include "worker/device/cuda_kernels.h"
#include "worker/device/device_checks.h"
#include "worker/optim/adamw_cuda.h"

namespace zeroshard {
namespace {

static_assert(device_internal::kElemFp32 == static_cast<int>(DType::kFp32));
static_assert(device_internal::kElemBf16 == static_cast<int>(DType::kBf16));

int Elem(DType dtype) { return static_cast<int>(dtype); }
cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace

absl::Status CudaDevice::Convert(const void* src, DType src_dtype, void* dst, DType dst_dtype,
                                 int64_t n) {
  ZS_RETURN_IF_ERROR(device_internal::CheckTwoDTypes("Convert", src_dtype, dst_dtype, n));
  if (src_dtype == dst_dtype) return Copy(dst, src, n * DTypeSize(src_dtype));
  ZS_RETURN_IF_ERROR(MakeCurrent());
  ZS_CUDA_RETURN_IF_ERROR(device_internal::LaunchConvert(src, Elem(src_dtype), dst, Elem(dst_dtype),
                                                         n, AsStream(stream_)));
  return absl::OkStatus();
}

absl::Status CudaDevice::AddInto(void* acc, DType acc_dtype, const void* x, DType x_dtype,
                                 int64_t n) {
  ZS_RETURN_IF_ERROR(device_internal::CheckTwoDTypes("AddInto", acc_dtype, x_dtype, n));
  ZS_RETURN_IF_ERROR(MakeCurrent());
  ZS_CUDA_RETURN_IF_ERROR(
      device_internal::LaunchAddInto(acc, Elem(acc_dtype), x, Elem(x_dtype), n, AsStream(stream_)));
  return absl::OkStatus();
}

absl::Status CudaDevice::Scale(void* x, DType dtype, float alpha, int64_t n) {
  ZS_RETURN_IF_ERROR(device_internal::CheckDType("Scale", dtype));
  ZS_RETURN_IF_ERROR(device_internal::CheckCount("Scale", n));
  ZS_RETURN_IF_ERROR(MakeCurrent());
  ZS_CUDA_RETURN_IF_ERROR(
      device_internal::LaunchScale(x, Elem(dtype), alpha, n, AsStream(stream_)));
  return absl::OkStatus();
}

absl::Status CudaDevice::SumSquaresAccumulate(const void* x, DType dtype, int64_t n, double* acc) {
  ZS_RETURN_IF_ERROR(device_internal::CheckDType("SumSquaresAccumulate", dtype));
  ZS_RETURN_IF_ERROR(device_internal::CheckCount("SumSquaresAccumulate", n));
  ZS_RETURN_IF_ERROR(MakeCurrent());
  ZS_CUDA_RETURN_IF_ERROR(
      device_internal::LaunchSumSquares(x, Elem(dtype), n, partials_, acc, AsStream(stream_)));
  return absl::OkStatus();
}

absl::Status CudaDevice::AdamW(const AdamWHyperparams& hp, int64_t step, float grad_scale,
                               const AdamWShard& shard) {
  ZS_RETURN_IF_ERROR(device_internal::CheckAdamW(step, shard));
  ZS_RETURN_IF_ERROR(MakeCurrent());
  return AdamWCuda(hp, step, grad_scale, shard, stream_);
}

}  // namespace zeroshard
