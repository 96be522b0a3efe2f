// HostUpdate: the fused AdamW over optimizer state in host memory, for the
// host and NVMe stores (optimizer_store.h). On the CPU device the gradient
// and output are host memory already and Device::AdamW runs on them. On a
// CUDA device (ZeRO-Offload): copy the fp32 gradient shard into a pinned
// host buffer, run AdamWCpu (bit-identical to the CUDA kernel, adamw.h)
// there, copy the new compute shard back into `out` and wait for it, so
// stream work issued afterwards (the all-gather) reads it.
// Pinned buffers (8 * max_n bytes, kBuffers) are allocated at first use.
// Errors: the device's. Thread safety: one thread.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "worker/device/device.h"
#include "worker/device/memory_accounting.h"
#include "worker/offload/optimizer_store.h"

namespace zeroshard {

class HostUpdate {
 public:
  HostUpdate(Device* device, MemoryAccountant* accountant, int64_t max_n, int threads,
             absl::Duration timeout)
      : device_(device),
        accountant_(accountant),
        max_n_(max_n),
        threads_(threads),
        timeout_(timeout) {}
  ~HostUpdate();
  HostUpdate(const HostUpdate&) = delete;
  HostUpdate& operator=(const HostUpdate&) = delete;

  absl::Status Run(const UnitState& host, const AdamWHyperparams& hp, int64_t step,
                   float grad_scale, const float* grad, void* out, DType dtype);

 private:
  Device* device_;
  MemoryAccountant* accountant_;
  int64_t max_n_;
  int threads_;
  absl::Duration timeout_;
  void* pinned_ = nullptr;  // 2 * max_n fp32: gradient, then compute shard.
};

}  // namespace zeroshard
