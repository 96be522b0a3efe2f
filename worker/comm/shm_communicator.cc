#include "worker/comm/shm_communicator.h"

#include <unistd.h>

#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "worker/comm/op_queue.h"
#include "worker/comm/reduce_math.h"
#include "worker/comm/shm_collectives.h"
#include "worker/comm/shm_group.h"
#include "worker/comm/shm_segment.h"

namespace zeroshard {
namespace {

class ShmCommunicator final : public Communicator {
 public:
  explicit ShmCommunicator(std::unique_ptr<ShmGroup> group) : group_(std::move(group)) {}
  ~ShmCommunicator() override { Abort(); }

  int rank() const override { return group_->rank(); }
  int world_size() const override { return group_->world_size(); }

  std::unique_ptr<Work> AllGather(const void* send, void* recv, int64_t count, DType dtype,
                                  const CollectiveOptions& opts) override {
    const CollectiveArgs one{send, recv, count};
    return AllGatherGroup({&one, 1}, dtype, opts);
  }

  std::unique_ptr<Work> ReduceScatter(const void* send, void* recv, int64_t count, DType dtype,
                                      ReduceOp op, const CollectiveOptions& opts) override {
    const CollectiveArgs one{send, recv, count};
    return ReduceScatterGroup({&one, 1}, dtype, op, opts);
  }

  std::unique_ptr<Work> AllGatherGroup(absl::Span<const CollectiveArgs> group, DType dtype,
                                       const CollectiveOptions& opts) override {
    ZS_RETURN_WORK_IF_ERROR(CheckCommGroup(group));
    std::vector<CollectiveArgs> members(group.begin(), group.end());
    return Submit(CommOp::kAllGather, GroupStatsBytes(members, dtype, world_size()), opts,
                  [=, this](absl::Time deadline) {
                    return ShmAllGatherGroup(*group_, members, DTypeSize(dtype), deadline);
                  });
  }

  std::unique_ptr<Work> ReduceScatterGroup(absl::Span<const CollectiveArgs> group, DType dtype,
                                           ReduceOp op, const CollectiveOptions& opts) override {
    ZS_RETURN_WORK_IF_ERROR(CheckCommGroup(group));
    ZS_RETURN_WORK_IF_ERROR(CheckCommDType(dtype, "ReduceScatter dtype"));
    std::vector<CollectiveArgs> members(group.begin(), group.end());
    return Submit(CommOp::kReduceScatter, GroupStatsBytes(members, dtype, world_size()), opts,
                  [=, this](absl::Time deadline) {
                    return ShmReduceScatterGroup(*group_, members, dtype, op, scratch_, deadline);
                  });
  }

  std::unique_ptr<Work> AllReduce(const void* send, void* recv, int64_t count, DType dtype,
                                  ReduceOp op, const CollectiveOptions& opts) override {
    ZS_RETURN_WORK_IF_ERROR(CheckCommBuffers(send, recv, count));
    ZS_RETURN_WORK_IF_ERROR(CheckCommDType(dtype, "AllReduce dtype", /*control_dtypes=*/true));
    return Submit(CommOp::kAllReduce, count * DTypeSize(dtype), opts,
                  [=, this](absl::Time deadline) {
                    return ShmAllReduce(*group_, send, recv, count, dtype, op, scratch_, deadline);
                  });
  }

  std::unique_ptr<Work> Broadcast(const void* send, void* recv, int64_t count, DType dtype,
                                  int root, const CollectiveOptions& opts) override {
    ZS_RETURN_WORK_IF_ERROR(CheckBroadcastArgs(send, recv, count, root, rank(), world_size()));
    const size_t bytes = static_cast<size_t>(count * DTypeSize(dtype));
    return Submit(CommOp::kBroadcast, static_cast<int64_t>(bytes), opts,
                  [=, this](absl::Time deadline) {
                    return ShmBroadcast(*group_, send, recv, bytes, root, deadline);
                  });
  }

  std::unique_ptr<Work> RingShift(const void* send, void* recv, int64_t count, DType dtype,
                                  const CollectiveOptions& opts) override {
    ZS_RETURN_WORK_IF_ERROR(CheckCommBuffers(send, recv, count));
    const size_t bytes = static_cast<size_t>(count * DTypeSize(dtype));
    return Submit(CommOp::kRingShift, static_cast<int64_t>(bytes), opts,
                  [=, this](absl::Time deadline) {
                    return ShmRingShift(*group_, send, recv, bytes, deadline);
                  });
  }

  absl::Status Barrier(const CollectiveOptions& opts) override {
    auto work = Submit(CommOp::kBarrier, 0, opts,
                       [this](absl::Time deadline) { return ShmBarrier(*group_, deadline); });
    return work->Wait(opts.timeout);
  }

  // Later ops fail at once (OpQueue); the running one's waits return
  // (ShmGroup::Abort).
  void Abort() override {
    queue_.Abort(absl::AbortedError("communicator aborted"));
    group_->Abort();
  }

  CommStats stats() const override { return queue_.stats(); }

 private:
  using Body = std::function<absl::Status(absl::Time deadline)>;

  std::unique_ptr<Work> Submit(CommOp op, int64_t bytes, const CollectiveOptions& opts, Body body) {
    return queue_.Submit(op, bytes, [this, timeout = opts.timeout, body = std::move(body)] {
      absl::Status status = body(absl::Now() + timeout);
      // The rounds are out of step now: peers waiting for this rank's next
      // one learn it at once instead of at their deadline.
      if (!status.ok()) group_->Abort();
      return status;
    });
  }

  std::unique_ptr<ShmGroup> group_;
  ShmScratch scratch_;  // Queue thread only.
  OpQueue queue_;       // Last: destroyed (joined) before the group.
};

struct PeerSegment {
  std::string name, host;
  int pid = 0;
};

std::vector<uint8_t> Encode(const std::string& s) { return {s.begin(), s.end()}; }

absl::StatusOr<PeerSegment> ParsePeer(const std::vector<uint8_t>& value, int q) {
  const std::vector<std::string> parts =
      absl::StrSplit(std::string(value.begin(), value.end()), '\n');
  PeerSegment peer;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[1], &peer.pid) || peer.pid <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm rendezvous: rank ", q, "'s entry is not \"name\\npid\\nhost\""));
  }
  peer.name = parts[0];
  peer.host = parts[2];
  return peer;
}

absl::Status CheckShmArgs(int rank, int world_size, const ShmOptions& opts) {
  ZS_RETURN_IF_ERROR(CheckRankAndWorldSize(rank, world_size));
  if (opts.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("ShmOptions.timeout must be positive");
  }
  if (opts.slot_bytes < 4096 || opts.slot_bytes % 64 != 0 ||
      opts.slot_bytes / (sizeof(float) * world_size) < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ShmOptions.slot_bytes must be a multiple of 64, >= 4096 and >= 4 x world_size, got ",
        opts.slot_bytes, " at world size ", world_size));
  }
  return absl::OkStatus();
}

// Maps every rank's segment in rank order, each checked to be on `host`;
// `own` (this rank's) moves into the group only on success.
absl::StatusOr<std::unique_ptr<ShmGroup>> MapPeers(Store& store, const std::string& prefix,
                                                   int rank, int world_size, const ShmOptions& opts,
                                                   const std::string& host, ShmSegment& own) {
  std::vector<std::string> keys;
  for (int q = 0; q < world_size; ++q) keys.push_back(absl::StrCat(prefix, "shm/", q));
  ZS_RETURN_IF_ERROR(store.Wait(keys, opts.timeout));
  std::vector<ShmSegment> segments;
  std::vector<int> pids;
  for (int q = 0; q < world_size; ++q) {
    ZS_ASSIGN_OR_RETURN(const std::vector<uint8_t> value, store.Get(keys[q]));
    ZS_ASSIGN_OR_RETURN(const PeerSegment peer, ParsePeer(value, q));
    if (peer.host != host) {
      return absl::FailedPreconditionError(
          absl::StrCat("shm: rank ", q, " is on host ", peer.host, ", rank ", rank, " on ", host,
                       "; the shm backend needs every rank on one host (use gloo across hosts)"));
    }
    pids.push_back(ProcessVisible(peer.pid) ? peer.pid : 0);
    if (q == rank) {
      segments.emplace_back();  // Filled with `own` below.
    } else {
      ZS_ASSIGN_OR_RETURN(ShmSegment s, ShmSegment::Open(peer.name, q, peer.pid, opts.slot_bytes));
      segments.push_back(std::move(s));
    }
  }
  segments[rank] = std::move(own);
  return std::make_unique<ShmGroup>(rank, std::move(segments), std::move(pids));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateShmCommunicator(Store& store,
                                                                    const std::string& prefix,
                                                                    int rank, int world_size,
                                                                    const ShmOptions& opts) {
  ZS_RETURN_IF_ERROR(CheckShmArgs(rank, world_size, opts));
  const absl::Time deadline = absl::Now() + opts.timeout;
  const std::string name = ShmSegmentName(rank);
  ZS_ASSIGN_OR_RETURN(ShmSegment own, ShmSegment::Create(name, rank, opts.slot_bytes));
  const std::string host = ShmHostId();
  ZS_RETURN_IF_ERROR(store.Set(absl::StrCat(prefix, "shm/", rank),
                               Encode(absl::StrCat(name, "\n", getpid(), "\n", host))));
  absl::StatusOr<std::unique_ptr<ShmGroup>> mapped =
      MapPeers(store, prefix, rank, world_size, opts, host, own);
  if (!mapped.ok()) {
    own.header().aborted.store(1);  // Peers that mapped it stop waiting.
    return mapped.status();
  }
  std::unique_ptr<ShmGroup> group = std::move(mapped).value();
  // Round 0: every rank has mapped every segment, so the names can go.
  absl::Status met = ShmBarrier(*group, deadline);
  group->UnlinkOwn();
  if (!met.ok()) {
    group->Abort();
    return met;
  }
  return std::unique_ptr<Communicator>(std::make_unique<ShmCommunicator>(std::move(group)));
}

}  // namespace zeroshard
