// ShardedEngine with stage-3 parameter offload (--offload-params nvme): the
// compute shards move between the ParamStore's host staging slots and the
// device. See sharded_engine.h "Parameter offload".
#include "common/status_macros.h"
#include "worker/engine/sharded_engine.h"

namespace zeroshard {

absl::Status ShardedEngine::WriteParamShard(int u, const std::function<absl::Status(void*)>& fill) {
  ZS_CHECK(params_ != nullptr);
  ZS_ASSIGN_OR_RETURN(void* slot, params_->BeginWrite(u));
  if (device_->kind() == DeviceKind::kCpu) {
    ZS_RETURN_IF_ERROR(fill(slot));  // Host memory is the device's.
  } else {
    const int64_t bytes = params_->bytes(u);
    DeviceBuffer shard = Buffer(MemoryKind::kBuffers);
    ZS_RETURN_IF_ERROR(shard.Allocate(bytes));
    ZS_RETURN_IF_ERROR(fill(shard.data()));
    ZS_RETURN_IF_ERROR(device_->Copy(slot, shard.data(), bytes));
  }
  // The write thread reads the slot: the device must be done with it.
  ZS_RETURN_IF_ERROR(device_->Synchronize(options_.collective_timeout));
  return params_->Commit(u);
}

absl::Status ShardedEngine::StageParamShard(int u, void* dst) {
  ZS_CHECK(params_ != nullptr);
  ZS_ASSIGN_OR_RETURN(const void* slot, params_->Acquire(u));
  ZS_RETURN_IF_ERROR(device_->Copy(dst, slot, params_->bytes(u)));
  // The slot may be reused by the reads issued next: the copy must be done.
  ZS_RETURN_IF_ERROR(device_->Synchronize(options_.collective_timeout));
  return params_->Prefetch(orders_->gather.Record(u, options_.params_offload.prefetch));
}

absl::Status ShardedEngine::EndStepOrders() {
  orders_->use.EndStep(0);
  const std::vector<int> next = orders_->gather.EndStep(options_.params_offload.prefetch);
  return params_ == nullptr ? absl::OkStatus() : params_->Prefetch(next);
}

}  // namespace zeroshard
