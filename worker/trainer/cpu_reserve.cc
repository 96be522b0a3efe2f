#include "worker/trainer/cpu_reserve.h"

#include <sys/resource.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/job_refusal.h"
#include "common/status_macros.h"
#include "worker/model/kernels.h"

namespace zeroshard {

absl::Status PrepareCpuCompute(Device& device) {
  const int64_t scratch = CpuKernelsScratchBytes();
  ZS_ASSIGN_OR_RETURN(const MemoryInfo memory, device.memory_info());
  if (memory.free_bytes < scratch) {
    return AsJobRefusal(absl::ResourceExhaustedError(absl::StrCat(
        "cpu: the matmuls' scratch (oneDNN's packed operands) needs ", scratch, " bytes and only ",
        memory.free_bytes, " are free (MemAvailable, capped by RLIMIT_DATA)")));
  }
  WarmUpCpuKernels();
  return absl::OkStatus();
}

int64_t LateMappingBytes(const JobConfig& job) {
  rlimit stack{};
  int64_t stack_bytes = int64_t{8} << 20;
  if (getrlimit(RLIMIT_STACK, &stack) == 0 && stack.rlim_cur != RLIM_INFINITY) {
    stack_bytes = static_cast<int64_t>(stack.rlim_cur);
  }
  const int64_t threads = std::max(1, job.threads) + 3;
  return threads * stack_bytes + (int64_t{16} << 20);
}

}  // namespace zeroshard
