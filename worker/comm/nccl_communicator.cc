#include "worker/comm/nccl_communicator.h"

#include <atomic>
#include <cstring>
#include <functional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "worker/comm/nccl_check.h"
#include "worker/comm/op_queue.h"

namespace zeroshard {
namespace {

constexpr char kUniqueIdKey[] = "nccl_id";

absl::StatusOr<ncclDataType_t> NcclType(DType d) {
  switch (d) {
    case DType::kFp32:
      return ncclFloat32;
    case DType::kBf16:
      return ncclBfloat16;
    case DType::kFp16:
      return ncclFloat16;
  }
  return absl::InvalidArgumentError(absl::StrCat("dtype ", static_cast<int>(d), " unknown"));
}

ncclRedOp_t NcclOp(ReduceOp op) { return op == ReduceOp::kSum ? ncclSum : ncclMax; }

// Polls a non-blocking communicator until its last call is no longer in
// progress; its final state as a Status.
absl::Status WaitNotInProgress(ncclComm_t comm, absl::Time deadline, const char* what) {
  absl::Duration pause = absl::Microseconds(20);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    ZS_GPU_RETURN_IF_ERROR(ncclCommGetAsyncError(comm, &state));
    if (state != ncclInProgress) return GpuStatus(state, what, __FILE__, __LINE__);
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(what, ": still in progress at the deadline"));
    }
    absl::SleepFor(pause);
    pause = std::min(pause * 2, absl::Milliseconds(1));
  }
}

// What the communicator and its Work handles share.
struct NcclShared {
  int device = 0;
  int rank = 0;
  int world_size = 1;
  std::atomic<bool> aborted{false};
  absl::Mutex mu;  // Orders NCCL calls against ncclCommAbort.
  ncclComm_t comm ABSL_GUARDED_BY(mu) = nullptr;
  absl::Status failed ABSL_GUARDED_BY(mu);  // First failure; sticky.
  CommStats stats ABSL_GUARDED_BY(mu);

  void Fail(const absl::Status& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (failed.ok()) failed = s;
  }
};

class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<NcclShared> shared, cudaEvent_t start, cudaEvent_t done, CommOp op,
           int64_t bytes)
      : shared_(std::move(shared)), start_(start), done_(done), op_(op), bytes_(bytes) {}
  ~NcclWork() override {
    cudaEventDestroy(start_);
    cudaEventDestroy(done_);
  }

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
    cudaError_t q = cudaEventQuery(done_);
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
    absl::Status s = GpuStatus(ncclCommGetAsyncError(shared_->comm, &async),
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
  cudaEvent_t start_;
  cudaEvent_t done_;
  const CommOp op_;
  const int64_t bytes_;
  bool finished_ = false;
  absl::Status final_;
};

absl::Status CheckDevicePointer(const void* p, int device, const char* field) {
  if (p == nullptr) return absl::InvalidArgumentError(absl::StrCat(field, " is null"));
  cudaPointerAttributes attr{};
  ZS_GPU_RETURN_IF_ERROR(cudaPointerGetAttributes(&attr, p));
  if (attr.type == cudaMemoryTypeManaged) return absl::OkStatus();
  if (attr.type != cudaMemoryTypeDevice || attr.device != device) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is not device memory on device ", device));
  }
  return absl::OkStatus();
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::shared_ptr<NcclShared> shared, cudaStream_t compute,
                   cudaStream_t gather_stream, cudaStream_t reduce_stream, cudaEvent_t ready,
                   float* barrier_scratch)
      : shared_(std::move(shared)),
        compute_(compute),
        gather_stream_(gather_stream),
        reduce_stream_(reduce_stream),
        ready_(ready),
        barrier_scratch_(barrier_scratch) {}

  ~NcclCommunicator() override {
    cudaSetDevice(shared_->device);
    {
      absl::MutexLock lock(&shared_->mu);
      if (shared_->comm != nullptr) {
        // Finished work flushes cleanly; anything stuck is aborted.
        bool clean =
            shared_->failed.ok() && !shared_->aborted.load() &&
            GpuStatus(ncclCommFinalize(shared_->comm), "ncclCommFinalize", __FILE__, __LINE__)
                .ok() &&
            WaitNotInProgress(shared_->comm, absl::Now() + absl::Seconds(10), "ncclCommFinalize")
                .ok();
        if (clean) {
          ncclCommDestroy(shared_->comm);
        } else {
          ncclCommAbort(shared_->comm);
        }
        shared_->comm = nullptr;
        shared_->aborted.store(true);
      }
    }
    cudaStreamSynchronize(gather_stream_);
    cudaStreamSynchronize(reduce_stream_);
    cudaFree(barrier_scratch_);
    cudaEventDestroy(ready_);
    cudaStreamDestroy(gather_stream_);
    cudaStreamDestroy(reduce_stream_);
  }

  int rank() const override { return shared_->rank; }
  int world_size() const override { return shared_->world_size; }

  std::unique_ptr<Work> AllGather(const void* send, void* recv, int64_t count, DType dtype,
                                  const CollectiveOptions& opts) override {
    const int64_t bytes = count * DTypeSize(dtype) * world_size();
    return Issue(CommOp::kAllGather, gather_stream_, bytes, opts, send, recv, count, dtype,
                 [=](ncclComm_t c, cudaStream_t s, ncclDataType_t t) {
                   return ncclAllGather(send, recv, count, t, c, s);
                 });
  }

  std::unique_ptr<Work> ReduceScatter(const void* send, void* recv, int64_t count, DType dtype,
                                      ReduceOp op, const CollectiveOptions& opts) override {
    const int64_t bytes = count * DTypeSize(dtype) * world_size();
    return Issue(CommOp::kReduceScatter, reduce_stream_, bytes, opts, send, recv, count, dtype,
                 [=](ncclComm_t c, cudaStream_t s, ncclDataType_t t) {
                   return ncclReduceScatter(send, recv, count, t, NcclOp(op), c, s);
                 });
  }

  std::unique_ptr<Work> AllReduce(const void* send, void* recv, int64_t count, DType dtype,
                                  ReduceOp op, const CollectiveOptions& opts) override {
    return Issue(CommOp::kAllReduce, reduce_stream_, count * DTypeSize(dtype), opts, send, recv,
                 count, dtype, [=](ncclComm_t c, cudaStream_t s, ncclDataType_t t) {
                   return ncclAllReduce(send, recv, count, t, NcclOp(op), c, s);
                 });
  }

  std::unique_ptr<Work> Broadcast(const void* send, void* recv, int64_t count, DType dtype,
                                  int root, const CollectiveOptions& opts) override {
    if (root < 0 || root >= world_size()) {
      return CompletedWork(absl::InvalidArgumentError(
          absl::StrCat("broadcast root ", root, " outside [0, ", world_size(), ")")));
    }
    // Only the root reads send; NCCL ignores it elsewhere.
    const void* checked_send = rank() == root ? send : recv;
    return Issue(CommOp::kBroadcast, reduce_stream_, count * DTypeSize(dtype), opts, checked_send,
                 recv, count, dtype, [=](ncclComm_t c, cudaStream_t s, ncclDataType_t t) {
                   return ncclBroadcast(send, recv, count, t, root, c, s);
                 });
  }

  absl::Status Barrier(const CollectiveOptions& opts) override {
    auto work =
        Issue(CommOp::kBarrier, reduce_stream_, 0, opts, barrier_scratch_, barrier_scratch_, 1,
              DType::kFp32, [this](ncclComm_t c, cudaStream_t s, ncclDataType_t t) {
                return ncclAllReduce(barrier_scratch_, barrier_scratch_, 1, t, ncclSum, c, s);
              });
    return work->Wait(opts.timeout);
  }

  void Abort() override {
    shared_->aborted.store(true);
    absl::MutexLock lock(&shared_->mu);
    if (shared_->comm != nullptr) {
      cudaSetDevice(shared_->device);
      ncclCommAbort(shared_->comm);
      shared_->comm = nullptr;
    }
  }

  CommStats stats() const override {
    absl::MutexLock lock(&shared_->mu);
    return shared_->stats;
  }

 private:
  using Launch = std::function<ncclResult_t(ncclComm_t, cudaStream_t, ncclDataType_t)>;

  // The one shared path (STYLE.md point 10): validate, order after the compute
  // stream, bracket the NCCL call with events, hand back a Work.
  std::unique_ptr<Work> Issue(CommOp op, cudaStream_t stream, int64_t bytes,
                              const CollectiveOptions& opts, const void* send, void* recv,
                              int64_t count, DType dtype, const Launch& launch) {
    if (count < 0) {
      return CompletedWork(
          absl::InvalidArgumentError(absl::StrCat("count must be >= 0, got ", count)));
    }
    auto type = NcclType(dtype);
    if (!type.ok()) return CompletedWork(type.status());
    if (shared_->aborted.load()) return CompletedWork(absl::AbortedError("communicator aborted"));
    if (cudaSetDevice(shared_->device) != cudaSuccess) {
      return CompletedWork(absl::InternalError("cudaSetDevice failed"));
    }
    if (count > 0) {
      if (auto s = CheckDevicePointer(send, shared_->device, "send"); !s.ok())
        return CompletedWork(s);
      if (auto s = CheckDevicePointer(recv, shared_->device, "recv"); !s.ok())
        return CompletedWork(s);
    }
    absl::MutexLock lock(&shared_->mu);
    if (shared_->comm == nullptr) return CompletedWork(absl::AbortedError("communicator aborted"));
    if (!shared_->failed.ok()) return CompletedWork(shared_->failed);
    cudaEvent_t start = nullptr;
    cudaEvent_t done = nullptr;
    absl::Status s = [&]() -> absl::Status {
      ZS_GPU_RETURN_IF_ERROR(cudaEventCreate(&start));
      ZS_GPU_RETURN_IF_ERROR(cudaEventCreate(&done));
      ZS_GPU_RETURN_IF_ERROR(cudaEventRecord(ready_, compute_));
      ZS_GPU_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, ready_, 0));
      ZS_GPU_RETURN_IF_ERROR(cudaEventRecord(start, stream));
      ZS_GPU_RETURN_IF_ERROR(launch(shared_->comm, stream, *type));
      ZS_RETURN_IF_ERROR(
          WaitNotInProgress(shared_->comm, absl::Now() + opts.timeout, CommOpName(op)));
      ZS_GPU_RETURN_IF_ERROR(cudaEventRecord(done, stream));
      return absl::OkStatus();
    }();
    if (!s.ok()) {
      shared_->Fail(s);
      if (start != nullptr) cudaEventDestroy(start);
      if (done != nullptr) cudaEventDestroy(done);
      return CompletedWork(s);
    }
    return std::make_unique<NcclWork>(shared_, start, done, op, bytes);
  }

  std::shared_ptr<NcclShared> shared_;
  cudaStream_t compute_;
  cudaStream_t gather_stream_;
  cudaStream_t reduce_stream_;
  cudaEvent_t ready_;
  float* barrier_scratch_;
};

absl::StatusOr<ncclUniqueId> ExchangeUniqueId(Store& store, const std::string& key, int rank,
                                              absl::Duration timeout) {
  ncclUniqueId id;
  if (rank == 0) {
    ZS_GPU_RETURN_IF_ERROR(ncclGetUniqueId(&id));
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&id);
    ZS_RETURN_IF_ERROR(store.Set(key, std::vector<uint8_t>(p, p + sizeof(id))));
    return id;
  }
  ZS_RETURN_IF_ERROR(store.Wait({key}, timeout));
  ZS_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, store.Get(key));
  if (bytes.size() != sizeof(id)) {
    return absl::DataLossError(absl::StrCat("store key ", key, " holds ", bytes.size(),
                                            " bytes, an ncclUniqueId has ", sizeof(id)));
  }
  std::memcpy(&id, bytes.data(), sizeof(id));
  return id;
}

}  // namespace

absl::StatusOr<int> CudaDeviceCount() {
  int n = 0;
  absl::Status s = GpuStatus(cudaGetDeviceCount(&n), "cudaGetDeviceCount", __FILE__, __LINE__);
  if (!s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("no usable CUDA device: ", s.message()));
  }
  if (n == 0) return absl::FailedPreconditionError("no CUDA device visible");
  return n;
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(Store& store,
                                                                     const std::string& prefix,
                                                                     int rank, int world_size,
                                                                     const NcclOptions& opts) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " / world_size ", world_size, " invalid"));
  }
  ZS_ASSIGN_OR_RETURN(const int devices, CudaDeviceCount());
  const int device = opts.device >= 0 ? opts.device : rank % devices;
  if (device >= devices) {
    return absl::InvalidArgumentError(
        absl::StrCat("NcclOptions.device ", device, " but only ", devices, " devices"));
  }
  ZS_GPU_RETURN_IF_ERROR(cudaSetDevice(device));
  const absl::Time deadline = absl::Now() + opts.timeout;
  ZS_ASSIGN_OR_RETURN(ncclUniqueId id,
                      ExchangeUniqueId(store, prefix + kUniqueIdKey, rank, opts.timeout));

  auto shared = std::make_shared<NcclShared>();
  shared->device = device;
  shared->rank = rank;
  shared->world_size = world_size;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // Initialisation polled against the deadline below.
  ncclComm_t comm = nullptr;
  absl::Status init = GpuStatus(ncclCommInitRankConfig(&comm, world_size, id, rank, &config),
                                "ncclCommInitRankConfig", __FILE__, __LINE__);
  if (init.ok()) init = WaitNotInProgress(comm, deadline, "ncclCommInitRankConfig");
  if (!init.ok()) {
    if (comm != nullptr) ncclCommAbort(comm);
    return init;
  }
  cudaStream_t gather = nullptr;
  cudaStream_t reduce = nullptr;
  cudaEvent_t ready = nullptr;
  float* scratch = nullptr;
  absl::Status s = [&]() -> absl::Status {
    ZS_GPU_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&gather, cudaStreamNonBlocking));
    ZS_GPU_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&reduce, cudaStreamNonBlocking));
    ZS_GPU_RETURN_IF_ERROR(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    ZS_GPU_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&scratch), sizeof(float)));
    return absl::OkStatus();
  }();
  if (!s.ok()) {
    ncclCommAbort(comm);
    return s;
  }
  {
    absl::MutexLock lock(&shared->mu);
    shared->comm = comm;
  }
  return std::unique_ptr<Communicator>(std::make_unique<NcclCommunicator>(
      std::move(shared), static_cast<cudaStream_t>(opts.compute_stream), gather, reduce, ready,
      scratch));
}

}  // namespace zeroshard
