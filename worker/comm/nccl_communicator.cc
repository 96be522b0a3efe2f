#include "worker/comm/nccl_communicator.h"

#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "worker/comm/nccl_internal.h"
#include "worker/comm/op_queue.h"
#include "worker/comm/reduce_math.h"

namespace zeroshard {
namespace {

constexpr char kUniqueIdKey[] = "nccl_id";

// The communicator's own streams (one per lane) and scratch, created after
// the communicators; whatever was made is released on every path.
struct NcclResources {
  NcclResources() = default;
  NcclResources(const NcclResources&) = delete;
  NcclResources& operator=(const NcclResources&) = delete;
  ~NcclResources() {
    for (cudaStream_t& s : streams) {
      if (s != nullptr) cudaStreamSynchronize(s);
    }
    if (barrier_scratch != nullptr) cudaFree(barrier_scratch);
    if (ready != nullptr) cudaEventDestroy(ready);
    for (cudaStream_t s : streams) {
      if (s != nullptr) cudaStreamDestroy(s);
    }
  }
  cudaStream_t stream(NcclLane lane) const { return streams[static_cast<int>(lane)]; }

  cudaStream_t streams[kNcclLanes] = {nullptr, nullptr};
  cudaEvent_t ready = nullptr;
  float* barrier_scratch = nullptr;
};

absl::Status CreateResources(NcclResources& r) {
  for (cudaStream_t& s : r.streams) {
    ZS_GPU_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
  ZS_GPU_RETURN_IF_ERROR(cudaEventCreateWithFlags(&r.ready, cudaEventDisableTiming));
  ZS_GPU_RETURN_IF_ERROR(cudaMalloc(reinterpret_cast<void**>(&r.barrier_scratch), sizeof(float)));
  return absl::OkStatus();
}

// ncclGroupStart, `member(i)` for each i < n, ncclGroupEnd (always, once
// started): the first failure, else ncclGroupEnd's result.
template <typename Member>
ncclResult_t Grouped(size_t n, Member&& member) {
  ncclResult_t first = ncclGroupStart();
  if (first != ncclSuccess) return first;
  for (size_t i = 0; i < n; ++i) {
    const ncclResult_t r = member(i);
    if (r != ncclSuccess && r != ncclInProgress && first == ncclSuccess) first = r;
  }
  const ncclResult_t end = ncclGroupEnd();
  return first != ncclSuccess ? first : end;
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
                   std::unique_ptr<NcclResources> res)
      : shared_(std::move(shared)), compute_(compute), res_(std::move(res)) {}

  // Finished work flushes cleanly (ncclCommFinalize, then destroy); anything
  // stuck or failed is aborted. The streams and scratch go with res_, after.
  ~NcclCommunicator() override {
    cudaSetDevice(shared_->device);
    absl::MutexLock lock(&shared_->mu);
    bool clean = shared_->failed.ok() && !shared_->aborted.load();
    for (ncclComm_t c : shared_->comms) {
      clean = clean && c != nullptr &&
              GpuStatus(ncclCommFinalize(c), "ncclCommFinalize", __FILE__, __LINE__).ok() &&
              WaitNotInProgress(c, absl::Now() + absl::Seconds(10), "ncclCommFinalize").ok();
    }
    if (!clean) {
      shared_->AbortLocked();
      return;
    }
    for (ncclComm_t& c : shared_->comms) {
      ncclCommDestroy(c);
      c = nullptr;
    }
    shared_->aborted.store(true);
  }

  int rank() const override { return shared_->rank; }
  int world_size() const override { return shared_->world_size; }

  std::unique_ptr<Work> AllGather(const void* send, void* recv, int64_t count, DType dtype,
                                  const CollectiveOptions& opts) override {
    const CollectiveArgs args[1] = {{send, recv, count}};
    return IssueAllGather(args, dtype, opts);
  }

  std::unique_ptr<Work> ReduceScatter(const void* send, void* recv, int64_t count, DType dtype,
                                      ReduceOp op, const CollectiveOptions& opts) override {
    const CollectiveArgs args[1] = {{send, recv, count}};
    return IssueReduceScatter(args, dtype, op, opts);
  }

  // A group is one ncclGroupStart/ncclGroupEnd: NCCL fuses its members into
  // one launch, one Work, counted in stats() as one call of the summed bytes
  // (as the Gloo and shm backends count theirs).
  std::unique_ptr<Work> AllGatherGroup(absl::Span<const CollectiveArgs> group, DType dtype,
                                       const CollectiveOptions& opts) override {
    ZS_RETURN_WORK_IF_ERROR(CheckCommGroup(group));
    return IssueAllGather(group, dtype, opts);
  }

  std::unique_ptr<Work> ReduceScatterGroup(absl::Span<const CollectiveArgs> group, DType dtype,
                                           ReduceOp op, const CollectiveOptions& opts) override {
    ZS_RETURN_WORK_IF_ERROR(CheckCommGroup(group));
    return IssueReduceScatter(group, dtype, op, opts);
  }

  std::unique_ptr<Work> AllReduce(const void* send, void* recv, int64_t count, DType dtype,
                                  ReduceOp op, const CollectiveOptions& opts) override {
    const CollectiveArgs args[1] = {{send, recv, count}};
    return Issue(CommOp::kAllReduce, NcclLane::kReduce, count * DTypeSize(dtype), opts, args, dtype,
                 [=](ncclComm_t c, cudaStream_t s, ncclDataType_t t) {
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
    const CollectiveArgs args[1] = {{rank() == root ? send : recv, recv, count}};
    return Issue(CommOp::kBroadcast, NcclLane::kReduce, count * DTypeSize(dtype), opts, args, dtype,
                 [=](ncclComm_t c, cudaStream_t s, ncclDataType_t t) {
                   return ncclBroadcast(send, recv, count, t, root, c, s);
                 });
  }

  absl::Status Barrier(const CollectiveOptions& opts) override {
    float* scratch = res_->barrier_scratch;
    const CollectiveArgs args[1] = {{scratch, scratch, 1}};
    auto work = Issue(CommOp::kBarrier, NcclLane::kReduce, 0, opts, args, DType::kFp32,
                      [scratch](ncclComm_t c, cudaStream_t s, ncclDataType_t t) {
                        return ncclAllReduce(scratch, scratch, 1, t, ncclSum, c, s);
                      });
    return work->Wait(opts.timeout);
  }

  // Waits for at most one NCCL call in flight (Issue never holds the lock
  // across its wait), then aborts both lanes.
  void Abort() override {
    shared_->aborted.store(true);
    absl::MutexLock lock(&shared_->mu);
    shared_->AbortLocked();
  }

  CommStats stats() const override {
    absl::MutexLock lock(&shared_->mu);
    return shared_->stats;
  }

 private:
  using Launch = std::function<ncclResult_t(ncclComm_t, cudaStream_t, ncclDataType_t)>;

  std::unique_ptr<Work> IssueAllGather(absl::Span<const CollectiveArgs> group, DType dtype,
                                       const CollectiveOptions& opts) {
    return Issue(CommOp::kAllGather, NcclLane::kGather, GroupStatsBytes(group, dtype, world_size()),
                 opts, group, dtype, [group](ncclComm_t c, cudaStream_t s, ncclDataType_t t) {
                   return Grouped(group.size(), [&](size_t i) {
                     return ncclAllGather(group[i].send, group[i].recv, group[i].count, t, c, s);
                   });
                 });
  }

  std::unique_ptr<Work> IssueReduceScatter(absl::Span<const CollectiveArgs> group, DType dtype,
                                           ReduceOp op, const CollectiveOptions& opts) {
    return Issue(CommOp::kReduceScatter, NcclLane::kReduce,
                 GroupStatsBytes(group, dtype, world_size()), opts, group, dtype,
                 [group, op](ncclComm_t c, cudaStream_t s, ncclDataType_t t) {
                   return Grouped(group.size(), [&](size_t i) {
                     return ncclReduceScatter(group[i].send, group[i].recv, group[i].count, t,
                                              NcclOp(op), c, s);
                   });
                 });
  }

  // Counts, dtype, device and every buffer of the op; NCCL's dtype.
  absl::StatusOr<ncclDataType_t> Validate(absl::Span<const CollectiveArgs> buffers,
                                          DType dtype) const {
    for (const CollectiveArgs& a : buffers) {
      if (a.count < 0) {
        return absl::InvalidArgumentError(absl::StrCat("count must be >= 0, got ", a.count));
      }
    }
    ZS_ASSIGN_OR_RETURN(const ncclDataType_t type, NcclType(dtype));
    if (shared_->aborted.load()) return absl::AbortedError("communicator aborted");
    ZS_GPU_RETURN_IF_ERROR(cudaSetDevice(shared_->device));
    for (const CollectiveArgs& a : buffers) {
      if (a.count == 0) continue;
      ZS_RETURN_IF_ERROR(CheckDevicePointer(a.send, shared_->device, "send"));
      ZS_RETURN_IF_ERROR(CheckDevicePointer(a.recv, shared_->device, "recv"));
    }
    return type;
  }

  // Under the lock, one NCCL call at a time: order the lane's stream after
  // the compute stream, record `start`, make the NCCL call(s).
  absl::Status Enqueue(NcclLane lane, ncclDataType_t type, cudaEvent_t start,
                       const Launch& launch) {
    absl::MutexLock lock(&shared_->mu);
    if (shared_->comm(lane) == nullptr) return absl::AbortedError("communicator aborted");
    ZS_RETURN_IF_ERROR(shared_->failed);
    const cudaStream_t stream = res_->stream(lane);
    ZS_GPU_RETURN_IF_ERROR(cudaEventRecord(res_->ready, compute_));
    ZS_GPU_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, res_->ready, 0));
    ZS_GPU_RETURN_IF_ERROR(cudaEventRecord(start, stream));
    ZS_GPU_RETURN_IF_ERROR(launch(shared_->comm(lane), stream, type));
    return absl::OkStatus();
  }

  // The one shared path (STYLE.md point 10): validate, enqueue under the
  // lock, wait (lock per poll) until NCCL has enqueued the op on the stream,
  // record the completion event, hand back a Work.
  std::unique_ptr<Work> Issue(CommOp op, NcclLane lane, int64_t bytes,
                              const CollectiveOptions& opts,
                              absl::Span<const CollectiveArgs> buffers, DType dtype,
                              const Launch& launch) {
    absl::StatusOr<ncclDataType_t> type = Validate(buffers, dtype);
    if (!type.ok()) return CompletedWork(type.status());
    cudaEvent_t start = nullptr;
    cudaEvent_t done = nullptr;
    absl::Status s = GpuStatus(cudaEventCreate(&start), "cudaEventCreate", __FILE__, __LINE__);
    if (s.ok()) s = GpuStatus(cudaEventCreate(&done), "cudaEventCreate", __FILE__, __LINE__);
    if (s.ok()) s = Enqueue(lane, *type, start, launch);
    if (s.ok()) s = shared_->WaitLane(lane, absl::Now() + opts.timeout, CommOpName(op));
    if (s.ok()) {
      s = GpuStatus(cudaEventRecord(done, res_->stream(lane)), "cudaEventRecord(done)", __FILE__,
                    __LINE__);
    }
    if (!s.ok()) {
      absl::MutexLock lock(&shared_->mu);
      shared_->Fail(s);
      if (start != nullptr) cudaEventDestroy(start);
      if (done != nullptr) cudaEventDestroy(done);
      return CompletedWork(s);
    }
    return MakeNcclWork(shared_, lane, compute_, start, done, op, bytes);
  }

  std::shared_ptr<NcclShared> shared_;
  cudaStream_t compute_;
  std::unique_ptr<NcclResources> res_;
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
  auto res = std::make_unique<NcclResources>();
  ZS_RETURN_IF_ERROR(CreateResources(*res));  // res releases what was made.
  ZS_ASSIGN_OR_RETURN(const NcclComms comms,
                      InitNcclComms(store, prefix + kUniqueIdKey, rank, world_size, opts.timeout));
  auto shared = std::make_shared<NcclShared>();
  shared->device = device;
  shared->rank = rank;
  shared->world_size = world_size;
  {
    absl::MutexLock lock(&shared->mu);
    for (int i = 0; i < kNcclLanes; ++i) shared->comms[i] = comms.lanes[i];
  }
  return std::unique_ptr<Communicator>(std::make_unique<NcclCommunicator>(
      std::move(shared), static_cast<cudaStream_t>(opts.compute_stream), std::move(res)));
}

}  // namespace zeroshard
