#include "worker/device/cpu_device.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "worker/device/convert.h"
#include "worker/device/device_checks.h"

namespace zeroshard {
namespace {

using device_internal::CheckAdamW;
using device_internal::CheckCount;
using device_internal::CheckDType;
using device_internal::CheckTwoDTypes;

constexpr size_t kAlign = 64;

class CpuEvent final : public DeviceEvent {
 public:
  DeviceKind kind() const override { return DeviceKind::kCpu; }
  // Work on the CPU device ran before RecordEvent returned.
  absl::Status Wait(absl::Duration) override { return absl::OkStatus(); }
};

// The one combination convert.cc has no function for: fp32 acc, bf16 x.
void AddBf16IntoFp32(float* acc, const bf16* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] += Bf16ToFloat(x[i]);
}

}  // namespace

absl::StatusOr<void*> CpuDevice::Allocate(int64_t bytes) {
  ZS_RETURN_IF_ERROR(CheckCount("Allocate", bytes));
  const size_t rounded =
      std::max<size_t>(kAlign, (static_cast<size_t>(bytes) + kAlign - 1) / kAlign * kAlign);
  void* ptr = std::aligned_alloc(kAlign, rounded);
  if (ptr != nullptr) return ptr;
  const absl::StatusOr<MemoryInfo> info = memory_info();
  return absl::ResourceExhaustedError(absl::StrCat(
      "cpu: cannot allocate ", bytes, " bytes (",
      info.ok() ? absl::StrCat(info->free_bytes, " bytes available of ", info->total_bytes)
                : std::string(info.status().message()),
      ")"));
}

void CpuDevice::Free(void* ptr) { std::free(ptr); }

absl::Status CpuDevice::Memset(void* dst, int byte, int64_t bytes) {
  ZS_RETURN_IF_ERROR(CheckCount("Memset", bytes));
  if (bytes > 0) std::memset(dst, byte, static_cast<size_t>(bytes));
  return absl::OkStatus();
}

absl::Status CpuDevice::Copy(void* dst, const void* src, int64_t bytes) {
  ZS_RETURN_IF_ERROR(CheckCount("Copy", bytes));
  if (bytes > 0 && dst != src) std::memcpy(dst, src, static_cast<size_t>(bytes));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DeviceEvent>> CpuDevice::RecordEvent() {
  return std::make_unique<CpuEvent>();
}

absl::Status CpuDevice::StreamWaitEvent(const DeviceEvent& event) {
  if (event.kind() == DeviceKind::kCpu) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "StreamWaitEvent: the cpu device has no stream to order a CUDA event on; call "
      "DeviceEvent::Wait");
}

absl::Status CpuDevice::Convert(const void* src, DType src_dtype, void* dst, DType dst_dtype,
                                int64_t n) {
  ZS_RETURN_IF_ERROR(CheckTwoDTypes("Convert", src_dtype, dst_dtype, n));
  if (src_dtype == dst_dtype) return Copy(dst, src, n * DTypeSize(src_dtype));
  if (src_dtype == DType::kBf16) {
    ToFp32(src, DType::kBf16, static_cast<float*>(dst), n);
  } else {
    FromFp32(static_cast<const float*>(src), DType::kBf16, dst, n);
  }
  return absl::OkStatus();
}

absl::Status CpuDevice::AddInto(void* acc, DType acc_dtype, const void* x, DType x_dtype,
                                int64_t n) {
  ZS_RETURN_IF_ERROR(CheckTwoDTypes("AddInto", acc_dtype, x_dtype, n));
  if (acc_dtype == x_dtype) {
    zeroshard::AddInto(acc, x, acc_dtype, n);
  } else if (x_dtype == DType::kFp32) {
    AddFp32Into(acc, acc_dtype, static_cast<const float*>(x), n);
  } else {
    AddBf16IntoFp32(static_cast<float*>(acc), static_cast<const bf16*>(x), n);
  }
  return absl::OkStatus();
}

absl::Status CpuDevice::Scale(void* x, DType dtype, float alpha, int64_t n) {
  ZS_RETURN_IF_ERROR(CheckDType("Scale", dtype));
  ZS_RETURN_IF_ERROR(CheckCount("Scale", n));
  if (dtype == DType::kFp32) {
    float* f = static_cast<float*>(x);
    for (int64_t i = 0; i < n; ++i) f[i] *= alpha;
  } else {
    bf16* h = static_cast<bf16*>(x);
    for (int64_t i = 0; i < n; ++i) h[i] = FloatToBf16(Bf16ToFloat(h[i]) * alpha);
  }
  return absl::OkStatus();
}

absl::Status CpuDevice::SumSquaresAccumulate(const void* x, DType dtype, int64_t n, double* acc) {
  ZS_RETURN_IF_ERROR(CheckDType("SumSquaresAccumulate", dtype));
  ZS_RETURN_IF_ERROR(CheckCount("SumSquaresAccumulate", n));
  // SumSquaresCpu's partials depend on the thread count only, which is fixed
  // per device: the same bits every run.
  *acc += dtype == DType::kFp32 ? SumSquaresCpu(static_cast<const float*>(x), n, threads_)
                                : SumSquares(x, dtype, n);
  return absl::OkStatus();
}

absl::Status CpuDevice::AdamW(const AdamWHyperparams& hp, int64_t step, float grad_scale,
                              const AdamWShard& shard) {
  ZS_RETURN_IF_ERROR(CheckAdamW(step, shard));
  AdamWCpu(hp, step, grad_scale, shard, threads_);
  return absl::OkStatus();
}

absl::StatusOr<MemoryInfo> ParseMeminfo(const std::string& text) {
  int64_t total_kb = -1, available_kb = -1;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (parts.size() < 2) continue;
    int64_t* field = parts[0] == "MemTotal:"       ? &total_kb
                     : parts[0] == "MemAvailable:" ? &available_kb
                                                   : nullptr;
    if (field != nullptr && !absl::SimpleAtoi(parts[1], field)) *field = -1;
  }
  if (total_kb < 0) return absl::InvalidArgumentError("/proc/meminfo: no MemTotal line");
  if (available_kb < 0) return absl::InvalidArgumentError("/proc/meminfo: no MemAvailable line");
  return MemoryInfo{total_kb * 1024, available_kb * 1024};
}

namespace {

// Bytes this process may still map under RLIMIT_DATA (its limit less
// /proc/self/status VmData), or -1 when there is no limit.
int64_t DataLimitHeadroom() {
  rlimit limit{};
  if (getrlimit(RLIMIT_DATA, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return -1;
  std::ifstream status("/proc/self/status");
  std::string key;
  int64_t used_kib = 0;
  for (std::string line; std::getline(status, line);) {
    std::istringstream fields(line);
    if (fields >> key && key == "VmData:" && fields >> used_kib) break;
  }
  return std::max<int64_t>(0, static_cast<int64_t>(limit.rlim_cur) - used_kib * 1024);
}

}  // namespace

// MemAvailable, capped by an RLIMIT_DATA (a test's or a container's limit).
absl::StatusOr<MemoryInfo> CpuDevice::memory_info() const {
  std::ifstream in("/proc/meminfo");
  if (!in) return absl::FailedPreconditionError("cpu: cannot read /proc/meminfo");
  std::stringstream text;
  text << in.rdbuf();
  ZS_ASSIGN_OR_RETURN(MemoryInfo info, ParseMeminfo(text.str()));
  const int64_t headroom = DataLimitHeadroom();
  if (headroom >= 0) info.free_bytes = std::min(info.free_bytes, headroom);
  return info;
}

}  // namespace zeroshard
