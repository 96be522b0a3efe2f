// The NCCL backend's Work handle (polls the op's completion event against a
// deadline, checking its communicator's asynchronous error meanwhile), the
// polls of a non-blocking communicator's state, and the shared abort.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "worker/comm/nccl_internal.h"
#include "worker/device/cuda_check.h"

namespace zeroshard {
namespace {

class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<NcclShared> shared, NcclLane lane, cudaStream_t compute,
           cudaEvent_t start, cudaEvent_t done, CommOp op, int64_t bytes)
      : shared_(std::move(shared)),
        lane_(lane),
        compute_(compute),
        start_(start),
        done_(done),
        op_(op),
        bytes_(bytes) {}
  ~NcclWork() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(done_);
  }

  absl::Status CompleteOnStream() override {
    if (finished_) return final_;
    if (shared_->aborted.load()) return absl::AbortedError("communicator aborted");
    ZS_GPU_RETURN_IF_ERROR(cudaSetDevice(shared_->device));
    ZS_GPU_RETURN_IF_ERROR(cudaStreamWaitEvent(compute_, done_, 0));
    return absl::OkStatus();
  }

  CommOp op() const override { return op_; }

  absl::Status Wait(absl::Duration timeout) override {
    if (finished_) return final_;
    const absl::Time deadline = absl::Now() + timeout;
    absl::Duration pause = absl::Microseconds(10);
    for (;;) {
      absl::Status s = Poll();
      if (!absl::IsUnavailable(s) || s.message() != kNotReady) return s;
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat(CommOpName(op_), " not complete after ", absl::FormatDuration(timeout)));
      }
      absl::SleepFor(pause);
      pause = std::min(pause * 2, absl::Milliseconds(1));
    }
  }

 private:
  static constexpr char kNotReady[] = "not ready";

  // OK/error when finished; UNAVAILABLE "not ready" while running.
  absl::Status Poll() {
    absl::MutexLock lock(&shared_->mu);
    if (shared_->aborted.load()) return Finish(absl::AbortedError("communicator aborted"));
    if (!shared_->failed.ok()) return Finish(shared_->failed);
    const cudaError_t q = QueryEvent(done_);  // Leaves no not-ready behind.
    if (q == cudaSuccess) {
      float ms = 0.0f;
      cudaEventElapsedTime(&ms, start_, done_);
      CommOpStats& st = shared_->stats.ops[static_cast<int>(op_)];
      st.calls += 1;
      st.bytes += bytes_;
      st.seconds += ms / 1000.0;
      return Finish(absl::OkStatus());
    }
    if (q != cudaErrorNotReady) {
      absl::Status s = GpuStatus(q, "cudaEventQuery(done)", __FILE__, __LINE__);
      shared_->Fail(s);
      return Finish(s);
    }
    ncclResult_t async = ncclSuccess;
    absl::Status s = GpuStatus(ncclCommGetAsyncError(shared_->comm(lane_), &async),
                               "ncclCommGetAsyncError", __FILE__, __LINE__);
    if (s.ok()) s = GpuStatus(async, "asynchronous NCCL error", __FILE__, __LINE__);
    if (!s.ok()) {
      shared_->Fail(s);
      return Finish(s);
    }
    return absl::UnavailableError(kNotReady);
  }

  absl::Status Finish(absl::Status s) {
    finished_ = true;
    final_ = s;
    return s;
  }

  std::shared_ptr<NcclShared> shared_;
  const NcclLane lane_;
  cudaStream_t compute_;
  cudaEvent_t start_;
  cudaEvent_t done_;
  const CommOp op_;
  const int64_t bytes_;
  bool finished_ = false;
  absl::Status final_;
};

}  // namespace

absl::StatusOr<ncclDataType_t> NcclType(DType d) {
  switch (d) {
    case DType::kFp32:
      return ncclFloat32;
    case DType::kBf16:
      return ncclBfloat16;
    case DType::kFp16:
      return ncclFloat16;
    case DType::kInt64:
      return ncclInt64;
    case DType::kFp64:
      return ncclFloat64;
  }
  return absl::InvalidArgumentError(absl::StrCat("dtype ", static_cast<int>(d), " unknown"));
}

absl::Status PollNotInProgress(absl::Time deadline, const char* what,
                               absl::FunctionRef<absl::StatusOr<ncclResult_t>()> state) {
  absl::Duration pause = absl::Microseconds(20);
  for (;;) {
    absl::StatusOr<ncclResult_t> now = state();
    if (!now.ok()) return now.status();
    if (*now != ncclInProgress) return GpuStatus(*now, what, __FILE__, __LINE__);
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(what, ": still in progress at the deadline"));
    }
    absl::SleepFor(pause);
    pause = std::min(pause * 2, absl::Milliseconds(1));
  }
}

absl::Status WaitNotInProgress(ncclComm_t comm, absl::Time deadline, const char* what) {
  return PollNotInProgress(deadline, what, [comm]() -> absl::StatusOr<ncclResult_t> {
    ncclResult_t state = ncclSuccess;
    ZS_GPU_RETURN_IF_ERROR(ncclCommGetAsyncError(comm, &state));
    return state;
  });
}

void NcclShared::AbortLocked() {
  aborted.store(true);
  cudaSetDevice(device);
  for (ncclComm_t& c : comms) {
    if (c != nullptr) ncclCommAbort(c);
    c = nullptr;
  }
}

absl::Status NcclShared::WaitLane(NcclLane lane, absl::Time deadline, const char* what) {
  return PollNotInProgress(deadline, what, [&]() -> absl::StatusOr<ncclResult_t> {
    absl::MutexLock lock(&mu);
    if (aborted.load() || comm(lane) == nullptr) {
      return absl::AbortedError("communicator aborted");
    }
    ncclResult_t state = ncclSuccess;
    ZS_GPU_RETURN_IF_ERROR(ncclCommGetAsyncError(comm(lane), &state));
    return state;
  });
}

std::unique_ptr<Work> MakeNcclWork(std::shared_ptr<NcclShared> shared, NcclLane lane,
                                   cudaStream_t compute, cudaEvent_t start, cudaEvent_t done,
                                   CommOp op, int64_t bytes) {
  return std::make_unique<NcclWork>(std::move(shared), lane, compute, start, done, op, bytes);
}

}  // namespace zeroshard
