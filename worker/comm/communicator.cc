#include "worker/comm/communicator.h"

#include "worker/comm/op_queue.h"

#include "common/status_macros.h"

namespace zeroshard {

const char* CommOpName(CommOp op) {
  switch (op) {
    case CommOp::kAllGather:
      return "all_gather";
    case CommOp::kReduceScatter:
      return "reduce_scatter";
    case CommOp::kAllReduce:
      return "all_reduce";
    case CommOp::kBroadcast:
      return "broadcast";
    case CommOp::kBarrier:
      return "barrier";
    case CommOp::kRingShift:
      return "ring_shift";
    case CommOp::kCount:
      break;
  }
  return "unknown";
}

double BusBandwidthFactor(CommOp op, int world_size) {
  ZS_CHECK(world_size >= 1);
  const double n = world_size;
  switch (op) {
    case CommOp::kAllGather:
    case CommOp::kReduceScatter:
      return (n - 1.0) / n;
    case CommOp::kAllReduce:
      return 2.0 * (n - 1.0) / n;
    case CommOp::kBroadcast:
    case CommOp::kRingShift:
      return 1.0;
    case CommOp::kBarrier:
    case CommOp::kCount:
      break;
  }
  return 0.0;
}

std::unique_ptr<Work> Communicator::RingShift(const void*, void*, int64_t, DType,
                                             const CollectiveOptions&) {
  return CompletedWork(absl::UnimplementedError("this backend has no ring shift"));
}

}  // namespace zeroshard
