#include "worker/comm/nccl_communicator.h"

#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "worker/comm/nccl_internal.h"
#include "worker/comm/op_queue.h"

namespace zeroshard {
namespace {

constexpr char kUniqueIdKey[] = "nccl_id";

// The communicator's own streams and scratch, created after the comm.
struct NcclResources {
  cudaStream_t gather = nullptr;
  cudaStream_t reduce = nullptr;
  cudaEvent_t ready = nullptr;
  float* barrier_scratch = nullptr;
};

absl::Status CreateResources(NcclResources* r) {
  ZS_GPU_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&r->gather, cudaStreamNonBlocking));
  ZS_GPU_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&r->reduce, cudaStreamNonBlocking));
  ZS_GPU_RETURN_IF_ERROR(cudaEventCreateWithFlags(&r->ready, cudaEventDisableTiming));
  ZS_GPU_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&r->barrier_scratch), sizeof(float)));
  return absl::OkStatus();
}

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
    return MakeNcclWork(shared_, compute_, start, done, op, bytes);
  }

  std::shared_ptr<NcclShared> shared_;
  cudaStream_t compute_;
  cudaStream_t gather_stream_;
  cudaStream_t reduce_stream_;
  cudaEvent_t ready_;
  float* barrier_scratch_;
};

}  // namespace

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
  ZS_ASSIGN_OR_RETURN(ncclComm_t comm,
                      InitNcclComm(store, prefix + kUniqueIdKey, rank, world_size, opts.timeout));
  NcclResources res;
  if (absl::Status s = CreateResources(&res); !s.ok()) {
    ncclCommAbort(comm);
    return s;
  }
  auto shared = std::make_shared<NcclShared>();
  shared->device = device;
  shared->rank = rank;
  shared->world_size = world_size;
  {
    absl::MutexLock lock(&shared->mu);
    shared->comm = comm;
  }
  return std::unique_ptr<Communicator>(std::make_unique<NcclCommunicator>(
      std::move(shared), static_cast<cudaStream_t>(opts.compute_stream), res.gather, res.reduce,
      res.ready, res.barrier_scratch));
}

}  // namespace zeroshard
