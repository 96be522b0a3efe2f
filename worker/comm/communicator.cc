#include "worker/comm/communicator.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "worker/comm/op_queue.h"
#include "worker/comm/reduce_math.h"

namespace zeroshard {
namespace {

// The default grouped collective's handle: one Work per member, waited in
// issue order under one deadline.
class GroupWork final : public Work {
 public:
  GroupWork(std::vector<std::unique_ptr<Work>> members, CommOp op)
      : members_(std::move(members)), op_(op) {}

  absl::Status Wait(absl::Duration timeout) override {
    const absl::Time deadline = absl::Now() + timeout;
    for (std::unique_ptr<Work>& w : members_) {
      ZS_RETURN_IF_ERROR(w->Wait(std::max(deadline - absl::Now(), absl::ZeroDuration())));
    }
    return absl::OkStatus();
  }
  // Every member on the stream, or none (one backend answers alike for all).
  absl::Status CompleteOnStream() override {
    for (std::unique_ptr<Work>& w : members_) ZS_RETURN_IF_ERROR(w->CompleteOnStream());
    return absl::OkStatus();
  }
  CommOp op() const override { return op_; }

 private:
  std::vector<std::unique_ptr<Work>> members_;
  CommOp op_;
};

// The default grouped collective: issue(member) for each, one GroupWork.
template <typename Issue>
std::unique_ptr<Work> IssueEach(absl::Span<const CollectiveArgs> group, CommOp op, Issue&& issue) {
  ZS_RETURN_WORK_IF_ERROR(CheckCommGroup(group));
  std::vector<std::unique_ptr<Work>> members;
  for (const CollectiveArgs& a : group) members.push_back(issue(a));
  return std::make_unique<GroupWork>(std::move(members), op);
}

}  // namespace

absl::Status NameOp(CommOp op, const absl::Status& status) {
  if (status.ok() || op == CommOp::kCount) return status;
  const char* name = CommOpName(op);
  if (absl::StartsWith(status.message(), name)) return status;
  return absl::Status(status.code(), absl::StrCat(name, ": ", status.message()));
}

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

std::unique_ptr<Work> Communicator::AllGatherGroup(absl::Span<const CollectiveArgs> group,
                                                   DType dtype, const CollectiveOptions& opts) {
  return IssueEach(group, CommOp::kAllGather, [&](const CollectiveArgs& a) {
    return AllGather(a.send, a.recv, a.count, dtype, opts);
  });
}

std::unique_ptr<Work> Communicator::ReduceScatterGroup(absl::Span<const CollectiveArgs> group,
                                                       DType dtype, ReduceOp op,
                                                       const CollectiveOptions& opts) {
  return IssueEach(group, CommOp::kReduceScatter, [&](const CollectiveArgs& a) {
    return ReduceScatter(a.send, a.recv, a.count, dtype, op, opts);
  });
}

std::unique_ptr<Work> Communicator::RingShift(const void*, void*, int64_t, DType,
                                              const CollectiveOptions&) {
  return CompletedWork(absl::UnimplementedError("this backend has no ring shift"));
}

}  // namespace zeroshard
