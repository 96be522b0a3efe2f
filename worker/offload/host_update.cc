#include "worker/offload/host_update.h"

#include "common/status_macros.h"

namespace zeroshard {

HostUpdate::~HostUpdate() {
  if (pinned_ == nullptr) return;
  device_->FreePinnedHost(pinned_);
  accountant_->Freed(MemoryKind::kBuffers, 8 * max_n_);
}

absl::Status HostUpdate::Run(const UnitState& host, const AdamWHyperparams& hp, int64_t step,
                             float grad_scale, const float* grad, void* out, DType dtype) {
  AdamWShard shard{host.master, host.m, host.v, grad, host.n, out, dtype};
  if (device_->kind() == DeviceKind::kCpu) return device_->AdamW(hp, step, grad_scale, shard);
  if (pinned_ == nullptr) {
    ZS_ASSIGN_OR_RETURN(pinned_, device_->AllocatePinnedHost(8 * max_n_));
    accountant_->Allocated(MemoryKind::kBuffers, 8 * max_n_);
  }
  auto* grad_host = static_cast<float*>(pinned_);
  void* out_host = grad_host + max_n_;
  ZS_RETURN_IF_ERROR(device_->Copy(grad_host, grad, host.n * 4));
  ZS_RETURN_IF_ERROR(device_->Synchronize(timeout_));
  shard.grad = grad_host;
  shard.compute_out = out == nullptr ? nullptr : out_host;
  AdamWCpu(hp, step, grad_scale, shard, threads_);
  if (out == nullptr) return absl::OkStatus();
  ZS_RETURN_IF_ERROR(device_->Copy(out, out_host, host.n * DTypeSize(dtype)));
  return device_->Synchronize(timeout_);
}

}  // namespace zeroshard
