#include "worker/comm/gloo_communicator.h"

#include <atomic>
#include <cstring>
#include <exception>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/device.h"
#include "worker/comm/gloo_links.h"
#include "worker/comm/gloo_ring_all_gather.h"
#include "worker/comm/gloo_ring_all_reduce.h"
#include "worker/comm/gloo_ring_broadcast.h"
#include "worker/comm/gloo_ring_reduce_scatter.h"
#include "worker/comm/gloo_store_adapter.h"
#include "worker/comm/gloo_transport.h"
#include "worker/comm/op_queue.h"
#include "worker/comm/reduce_math.h"

namespace zeroshard {
namespace {

// Slot space of zeroshard's rings, which carry every op: Gloo's own
// collectives (prefixes 0x01-0x08, gloo/types.h) are not used, since Abort
// cannot always wake their waits (gloo_ring_broadcast.h). Below the prefix:
// the op's tag, then kRingSegmentBits for its segments (2^24 segments of
// 1 MiB: 16 TiB per op; 2^32 ops per communicator).
constexpr uint64_t kRingSlotPrefix = uint64_t{0x7a} << 56;
constexpr int kRingSegmentBits = 24;

std::chrono::milliseconds GlooTimeout(absl::Duration d) {
  return std::chrono::milliseconds(std::max<int64_t>(1, absl::ToInt64Milliseconds(d)));
}

// Gloo reports a timeout only in the exception text ("Timed out waiting ...",
// "Read timeout", "Connect timeout").
absl::Status StatusFromGloo(const std::exception& e, bool is_io, bool aborted) {
  const std::string what = e.what();
  const std::string lower = absl::AsciiStrToLower(what);
  if (aborted) return absl::AbortedError(absl::StrCat("communicator aborted: ", what));
  if (absl::StrContains(lower, "timed out") || absl::StrContains(lower, "timeout")) {
    return absl::DeadlineExceededError(absl::StrCat("gloo: ", what));
  }
  if (is_io) return absl::UnavailableError(absl::StrCat("gloo: ", what));
  return absl::InternalError(absl::StrCat("gloo: ", what));
}

class GlooCommunicator final : public Communicator {
 public:
  // `devices` own the contexts' connections and loop threads.
  GlooCommunicator(std::vector<std::shared_ptr<gloo::transport::Device>> devices, GlooLinks links)
      : devices_(std::move(devices)), links_(std::move(links)) {}
  // Aborts (its waits return, the pairs close), then queue_'s destructor
  // joins the op thread.
  ~GlooCommunicator() override { Abort(); }

  int rank() const override { return links_.rank(); }
  int world_size() const override { return links_.size(); }

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

  // A group runs as one item of the queue: its members' rings back to back.
  std::unique_ptr<Work> AllGatherGroup(absl::Span<const CollectiveArgs> group, DType dtype,
                                       const CollectiveOptions& opts) override {
    ZS_RETURN_WORK_IF_ERROR(CheckCommGroup(group));
    const int n = world_size();
    std::vector<std::function<void()>> bodies;
    for (const CollectiveArgs& a : group) {
      const size_t bytes = static_cast<size_t>(a.count * DTypeSize(dtype));
      if ((n - 1) * RingSegments(bytes) >= (int64_t{1} << kRingSegmentBits)) {
        return CompletedWork(absl::InvalidArgumentError("AllGather: block too large for one op"));
      }
      RingAllGatherArgs args{
          a.recv, bytes, a.send, NextRingSlot(), GlooTimeout(opts.timeout), &pending_waits_};
      bodies.push_back([this, args] { RingAllGather(links_, args); });
    }
    return SubmitAll(CommOp::kAllGather, GroupStatsBytes(group, dtype, n), std::move(bodies));
  }

  std::unique_ptr<Work> ReduceScatterGroup(absl::Span<const CollectiveArgs> group, DType dtype,
                                           ReduceOp op, const CollectiveOptions& opts) override {
    ZS_RETURN_WORK_IF_ERROR(CheckCommGroup(group));
    ZS_RETURN_WORK_IF_ERROR(CheckCommDType(dtype, "ReduceScatter dtype"));
    std::vector<std::function<void()>> bodies;
    for (const CollectiveArgs& a : group) {
      RingReduceScatterArgs args{
          a.send,         a.recv, a.count, dtype, op, NextRingSlot(), GlooTimeout(opts.timeout),
          &pending_waits_};
      bodies.push_back([this, args] {
        if (args.count > 0) RingReduceScatter(links_, args, ring_scratch_);
      });
    }
    return SubmitAll(CommOp::kReduceScatter, GroupStatsBytes(group, dtype, world_size()),
                     std::move(bodies));
  }

  std::unique_ptr<Work> AllReduce(const void* send, void* recv, int64_t count, DType dtype,
                                  ReduceOp op, const CollectiveOptions& opts) override {
    ZS_RETURN_WORK_IF_ERROR(CheckCommBuffers(send, recv, count));
    ZS_RETURN_WORK_IF_ERROR(CheckCommDType(dtype, "AllReduce dtype", /*control_dtypes=*/true));
    const RingAllReduceArgs args{send,
                                 recv,
                                 count,
                                 dtype,
                                 op,
                                 NextRingSlot(),
                                 NextRingSlot(),
                                 GlooTimeout(opts.timeout),
                                 &pending_waits_};
    return Submit(CommOp::kAllReduce, count * DTypeSize(dtype),
                  [this, args] { RingAllReduce(links_, args, all_reduce_scratch_); });
  }

  std::unique_ptr<Work> Broadcast(const void* send, void* recv, int64_t count, DType dtype,
                                  int root, const CollectiveOptions& opts) override {
    ZS_RETURN_WORK_IF_ERROR(CheckBroadcastArgs(send, recv, count, root, rank(), world_size()));
    const size_t bytes = static_cast<size_t>(count * DTypeSize(dtype));
    if (RingSegments(bytes) >= (int64_t{1} << kRingSegmentBits)) {
      return CompletedWork(absl::InvalidArgumentError("Broadcast: too large for one op"));
    }
    const RingBroadcastArgs args{
        recv, bytes, root, NextRingSlot(), GlooTimeout(opts.timeout), &pending_waits_};
    return Submit(CommOp::kBroadcast, static_cast<int64_t>(bytes), [=, this] {
      if (bytes == 0) return;  // Its buffers may be null.
      if (rank() == root && send != recv) std::memmove(recv, send, bytes);
      RingBroadcast(links_, args);
    });
  }

  std::unique_ptr<Work> RingShift(const void* send, void* recv, int64_t count, DType dtype,
                                  const CollectiveOptions& opts) override {
    ZS_RETURN_WORK_IF_ERROR(CheckCommBuffers(send, recv, count));
    const size_t bytes = static_cast<size_t>(count * DTypeSize(dtype));
    const uint64_t slot = NextRingSlot();
    const auto timeout = GlooTimeout(opts.timeout);
    return Submit(CommOp::kRingShift, static_cast<int64_t>(bytes), [=, this] {
      if (bytes > 0) RingShiftBytes(links_, send, recv, bytes, slot, timeout, &pending_waits_);
    });
  }

  absl::Status Barrier(const CollectiveOptions& opts) override {
    // A one-byte all-gather: a rank has every other rank's byte only once
    // all have arrived.
    const RingAllGatherArgs args{
        nullptr, 1, nullptr, NextRingSlot(), GlooTimeout(opts.timeout), &pending_waits_};
    auto work = Submit(CommOp::kBarrier, 0, [this, args] {
      std::vector<char> marks(world_size());
      RingAllGatherArgs with_marks = args;
      with_marks.out = marks.data();
      RingAllGather(links_, with_marks);
    });
    return work->Wait(opts.timeout);
  }

  void Abort() override {
    aborted_.store(true);
    queue_.Abort(absl::AbortedError("communicator aborted"));
    pending_waits_.AbortAll();
    CloseLinks();
  }

  CommStats stats() const override { return queue_.stats(); }

 private:
  uint64_t NextRingSlot() { return kRingSlotPrefix | (next_ring_tag_++ << kRingSegmentBits); }
  std::unique_ptr<Work> SubmitAll(CommOp op, int64_t bytes,
                                  std::vector<std::function<void()>> bodies) {
    return Submit(op, bytes, [bodies = std::move(bodies)] {
      for (const std::function<void()>& body : bodies) body();
    });
  }
  std::unique_ptr<Work> Submit(CommOp op, int64_t bytes, std::function<void()> body) {
    return queue_.Submit(op, bytes, [this, body = std::move(body)]() -> absl::Status {
      if (aborted_.load()) return absl::AbortedError("communicator aborted");
      absl::Status failed;
      try {
        body();
        return absl::OkStatus();
      } catch (const gloo::IoException& e) {
        failed = StatusFromGloo(e, /*is_io=*/true, aborted_.load());
      } catch (const std::exception& e) {
        failed = StatusFromGloo(e, /*is_io=*/false, aborted_.load());
      }
      // Unusable after any failure: every connection closes, so peers
      // waiting on either context learn it at once (Gloo closes only the
      // failed context's own pairs).
      CloseLinks();
      return failed;
    });
  }
  void CloseLinks() {
    AbortGlooContext(*links_.main);
    if (links_.reverse != nullptr) AbortGlooContext(*links_.reverse);
  }

  std::vector<std::shared_ptr<gloo::transport::Device>> devices_;
  GlooLinks links_;
  std::atomic<bool> aborted_{false};
  uint64_t next_ring_tag_ = 0;               // Issue thread only; equal on every rank.
  RingScratch ring_scratch_;                 // Queue thread only.
  RingAllReduceScratch all_reduce_scratch_;  // Queue thread only.
  PendingWaits pending_waits_;               // The rings' waits, for Abort.
  OpQueue queue_;                            // Last: destroyed (joined) before the context.
};

// A context connected to every rank through the store under `prefix`, on a
// device (its own loop thread) appended to `devices`.
absl::StatusOr<std::shared_ptr<gloo::Context>> ConnectContext(
    Store& store, const std::string& prefix, int rank, int world_size, const GlooOptions& opts,
    std::vector<std::shared_ptr<gloo::transport::Device>>& devices) {
  GlooStoreAdapter adapter(store, prefix, opts.timeout);
  try {
    devices.push_back(CreateTcpDevice(opts.hostname));
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, world_size);
    context->setTimeout(GlooTimeout(opts.timeout));
    context->connectFullMesh(adapter, devices.back());
    return std::shared_ptr<gloo::Context>(std::move(context));
  } catch (const std::exception& e) {
    absl::Status store_error = adapter.last_error();
    if (!store_error.ok()) {
      return absl::Status(store_error.code(),
                          absl::StrCat("gloo rendezvous (prefix ", prefix, ", rank ", rank, "/",
                                       world_size, "): ", store_error.message()));
    }
    const bool is_io = dynamic_cast<const gloo::IoException*>(&e) != nullptr;
    return StatusFromGloo(e, is_io, /*aborted=*/false);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooCommunicator(Store& store,
                                                                     const std::string& prefix,
                                                                     int rank, int world_size,
                                                                     const GlooOptions& opts) {
  ZS_RETURN_IF_ERROR(CheckRankAndWorldSize(rank, world_size));
  if (opts.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("GlooOptions.timeout must be positive");
  }
  std::vector<std::shared_ptr<gloo::transport::Device>> devices;
  GlooLinks links;
  ZS_ASSIGN_OR_RETURN(links.main, ConnectContext(store, prefix, rank, world_size, opts, devices));
  if (world_size == 2) {  // One connection per direction (gloo_links.h).
    ZS_ASSIGN_OR_RETURN(
        links.reverse, ConnectContext(store, prefix + "reverse/", rank, world_size, opts, devices));
  }
  return std::unique_ptr<Communicator>(
      std::make_unique<GlooCommunicator>(std::move(devices), std::move(links)));
}

}  // namespace zeroshard
