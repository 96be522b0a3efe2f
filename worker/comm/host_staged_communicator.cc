#include "worker/comm/host_staged_communicator.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/comm/op_queue.h"
#include "worker/comm/reduce_math.h"
#include "worker/comm/wait_or_abort.h"

namespace zeroshard {
namespace {

// The inner op gets the op's remaining time as its own timeout; waiting a
// little longer lets its own error (a timeout, a peer gone, with its detail)
// arrive rather than a bare "not complete" from the wait.
constexpr absl::Duration kInnerWaitGrace = absl::Seconds(1);

absl::Duration Remaining(absl::Time deadline) {
  return std::max(deadline - absl::Now(), absl::ZeroDuration());
}

absl::Status AbortedStatus() { return absl::AbortedError("host-staged communicator aborted"); }

// Arguments every op shares: a non-negative count, buffers when there is data.
absl::Status CheckArgs(const void* send, const void* recv, int64_t count, const char* what) {
  if (count < 0) return absl::InvalidArgumentError(absl::StrCat(what, ": count ", count, " < 0"));
  if (count == 0 || (send != nullptr && recv != nullptr)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, ": null buffer with count ", count));
}

// Pinned host memory of one device, grown by reallocation; queue thread only.
class StagingBuffer {
 public:
  explicit StagingBuffer(Device* device) : device_(device) {}
  ~StagingBuffer() { device_->FreePinnedHost(data_); }
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;

  // At least `bytes`; the old contents are not kept.
  absl::StatusOr<char*> Get(int64_t bytes) {
    if (bytes <= capacity_) return data_;
    device_->FreePinnedHost(data_);
    data_ = nullptr;
    capacity_ = 0;
    ZS_ASSIGN_OR_RETURN(void* data, device_->AllocatePinnedHost(bytes));
    data_ = static_cast<char*>(data);
    capacity_ = bytes;
    return data_;
  }
  // [Note: failed collective buffers]: a failed op may still write it.
  void Abandon() {
    KeepForever(data_);
    data_ = nullptr;
    capacity_ = 0;
  }

 private:
  Device* const device_;
  char* data_ = nullptr;
  int64_t capacity_ = 0;
};

// One op in the three steps of host_staged_communicator.h: what step 1 copies
// in, the inner op (in place on the staging buffer), what step 3 copies out.
// Offsets and sizes are in bytes.
struct StagedOp {
  int64_t staging_bytes = 0;
  const void* src = nullptr;  // Device memory.
  int64_t in_at = 0;          // Where in staging the input goes.
  int64_t in_bytes = 0;
  void* dst = nullptr;  // Device memory.
  int64_t out_at = 0;   // Where in staging the result is read.
  int64_t out_bytes = 0;
  std::function<std::unique_ptr<Work>(char* staging, const CollectiveOptions&)> inner;
};

// AllReduce and Broadcast: input and result the whole `bytes` of staging.
StagedOp FlatOp(const void* send, void* recv, int64_t bytes, int64_t in_bytes,
                decltype(StagedOp::inner) inner) {
  return StagedOp{.staging_bytes = bytes,
                  .src = send,
                  .in_at = 0,
                  .in_bytes = in_bytes,
                  .dst = recv,
                  .out_at = 0,
                  .out_bytes = bytes,
                  .inner = std::move(inner)};
}

class HostStagedCommunicator final : public Communicator {
 public:
  HostStagedCommunicator(std::unique_ptr<Communicator> inner, Device* device)
      : inner_(std::move(inner)), device_(device), staging_(device) {}
  // Aborting the inner op makes a running body return; queue_ then joins.
  ~HostStagedCommunicator() override { Abort(); }

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }

  std::unique_ptr<Work> AllGather(const void* send, void* recv, int64_t count, DType dtype,
                                  const CollectiveOptions& opts) override {
    if (auto s = CheckArgs(send, recv, count, "AllGather"); !s.ok()) return CompletedWork(s);
    const int64_t bytes = count * DTypeSize(dtype);
    const int64_t n = world_size();
    const int64_t r = rank();
    StagedOp op{.staging_bytes = n * bytes,
                .src = send,
                .in_at = r * bytes,
                .in_bytes = bytes,
                .dst = recv,
                .out_at = 0,
                .out_bytes = n * bytes,
                .inner = [=, this](char* staging, const CollectiveOptions& o) {
                  return inner_->AllGather(staging + r * bytes, staging, count, dtype, o);
                }};
    return Submit(CommOp::kAllGather, n * bytes, std::move(op), opts.timeout);
  }

  std::unique_ptr<Work> ReduceScatter(const void* send, void* recv, int64_t count, DType dtype,
                                      ReduceOp reduce, const CollectiveOptions& opts) override {
    if (auto s = CheckArgs(send, recv, count, "ReduceScatter"); !s.ok()) return CompletedWork(s);
    if (auto s = CheckCommDType(dtype, "ReduceScatter dtype"); !s.ok()) return CompletedWork(s);
    const int64_t bytes = count * DTypeSize(dtype);
    const int64_t n = world_size();
    const int64_t r = rank();
    StagedOp op{.staging_bytes = n * bytes,
                .src = send,
                .in_at = 0,
                .in_bytes = n * bytes,
                .dst = recv,
                .out_at = r * bytes,
                .out_bytes = bytes,
                .inner = [=, this](char* staging, const CollectiveOptions& o) {
                  return inner_->ReduceScatter(staging, staging + r * bytes, count, dtype, reduce,
                                               o);
                }};
    return Submit(CommOp::kReduceScatter, n * bytes, std::move(op), opts.timeout);
  }

  std::unique_ptr<Work> AllReduce(const void* send, void* recv, int64_t count, DType dtype,
                                  ReduceOp reduce, const CollectiveOptions& opts) override {
    if (auto s = CheckArgs(send, recv, count, "AllReduce"); !s.ok()) return CompletedWork(s);
    if (auto s = CheckCommDType(dtype, "AllReduce dtype", /*control_dtypes=*/true); !s.ok()) {
      return CompletedWork(s);
    }
    const int64_t bytes = count * DTypeSize(dtype);
    auto inner = [=, this](char* staging, const CollectiveOptions& o) {
      return inner_->AllReduce(staging, staging, count, dtype, reduce, o);
    };
    return Submit(CommOp::kAllReduce, bytes, FlatOp(send, recv, bytes, bytes, inner), opts.timeout);
  }

  std::unique_ptr<Work> Broadcast(const void* send, void* recv, int64_t count, DType dtype,
                                  int root, const CollectiveOptions& opts) override {
    if (root < 0 || root >= world_size()) {
      return CompletedWork(absl::InvalidArgumentError(
          absl::StrCat("Broadcast: root ", root, " outside [0, ", world_size(), ")")));
    }
    const bool is_root = rank() == root;
    // Only the root reads send; others may pass null.
    if (auto s = CheckArgs(is_root ? send : recv, recv, count, "Broadcast"); !s.ok()) {
      return CompletedWork(s);
    }
    const int64_t bytes = count * DTypeSize(dtype);
    auto inner = [=, this](char* staging, const CollectiveOptions& o) {
      return inner_->Broadcast(staging, staging, count, dtype, root, o);
    };
    return Submit(CommOp::kBroadcast, bytes, FlatOp(send, recv, bytes, is_root ? bytes : 0, inner),
                  opts.timeout);
  }

  absl::Status Barrier(const CollectiveOptions& opts) override {
    if (broken_.load()) return AbortedStatus();
    // Queued, so it also waits for the ops issued before it (as Gloo's).
    auto work = queue_.Submit(CommOp::kBarrier, 0, [this, opts]() -> absl::Status {
      if (broken_.load()) return AbortedStatus();
      absl::Status s = inner_->Barrier(opts);
      if (!s.ok()) Break();
      return s;
    });
    return work->Wait(opts.timeout);
  }

  void Abort() override {
    broken_.store(true);
    queue_.Abort(AbortedStatus());
    inner_->Abort();
  }

  CommStats stats() const override { return queue_.stats(); }

 private:
  std::unique_ptr<Work> Submit(CommOp kind, int64_t bytes, StagedOp op, absl::Duration timeout) {
    if (broken_.load()) return CompletedWork(AbortedStatus());
    return queue_.Submit(kind, bytes, [this, op = std::move(op), timeout] {
      if (broken_.load()) return AbortedStatus();
      if (op.staging_bytes == 0) return absl::OkStatus();  // Every rank skips alike.
      absl::Status s = RunSteps(op, absl::Now() + timeout);
      if (!s.ok()) {
        staging_.Abandon();
        Break();
      }
      return s;
    });
  }

  // Steps 1-3 of host_staged_communicator.h, on the queue thread.
  absl::Status RunSteps(const StagedOp& op, absl::Time deadline) {
    ZS_ASSIGN_OR_RETURN(char* staging, staging_.Get(op.staging_bytes));
    ZS_RETURN_IF_ERROR(CopyAndWait(staging + op.in_at, op.src, op.in_bytes, deadline));
    CollectiveOptions inner_opts;
    inner_opts.timeout = Remaining(deadline);
    std::unique_ptr<Work> work = op.inner(staging, inner_opts);
    ZS_RETURN_IF_ERROR(work->Wait(Remaining(deadline) + kInnerWaitGrace));
    return CopyAndWait(op.dst, staging + op.out_at, op.out_bytes, deadline);
  }

  // A device copy, waited for within the deadline ([Note: staged device calls]).
  absl::Status CopyAndWait(void* dst, const void* src, int64_t bytes, absl::Time deadline) {
    if (bytes == 0) return absl::OkStatus();
    ZS_RETURN_IF_ERROR(device_->Copy(dst, src, bytes));
    ZS_ASSIGN_OR_RETURN(std::unique_ptr<DeviceEvent> copied, device_->RecordEvent());
    return copied->Wait(Remaining(deadline));
  }

  // A failed op leaves the inner op possibly running and the ranks out of
  // step: the generation is over, so later ops fail ABORTED.
  void Break() {
    broken_.store(true);
    inner_->Abort();
  }

  std::unique_ptr<Communicator> inner_;
  Device* const device_;
  std::atomic<bool> broken_{false};
  StagingBuffer staging_;  // Freed after queue_ has joined.
  OpQueue queue_;          // Last: destroyed (joined) first.
};

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateHostStagedCommunicator(
    std::unique_ptr<Communicator> host, Device* device) {
  if (host == nullptr) return absl::InvalidArgumentError("host-staged: null host communicator");
  if (device == nullptr) return absl::InvalidArgumentError("host-staged: null device");
  return std::unique_ptr<Communicator>(
      std::make_unique<HostStagedCommunicator>(std::move(host), device));
}

}  // namespace zeroshard
