// gRPC CheckpointService (proto/zeroshard/v1/checkpoint.proto) over a
// CheckpointStore: a thin adapter. Every field is validated by the store,
// which names it in INVALID_ARGUMENT; absl::Status becomes grpc::Status in
// common/rpc/grpc_status.h. Bad input never crashes the server.
//
// UploadShard and DownloadRange move chunk frames (framed_checkpoint_service.h).
//
// Register it on any grpc::ServerBuilder, e.g. as one of the extra services
// of CoordinatorServer::Start. The checkpoint trigger (RequestCheckpoint /
// GetCheckpointTrigger) is an in-memory counter: one job per coordinator, so
// job_id is not used to separate counters, and it resets with the process.
//
// Thread-safe: gRPC calls handlers from many threads; the store locks.
#pragma once

#include <atomic>
#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "common/rpc/stream_limits.h"
#include "server/checkpoint/checkpoint_store.h"
#include "server/checkpoint/framed_checkpoint_service.h"

namespace zeroshard::server {

class CheckpointServiceImpl final : public FramedCheckpointService {
 public:
  // `store` and `streams` (open UploadShard / DownloadRange streams per
  // caller; null = no limit) are not owned and must outlive the service.
  explicit CheckpointServiceImpl(CheckpointStore* store, StreamLimits* streams = nullptr)
      : store_(store), streams_(streams) {}

  grpc::Status BeginCheckpoint(grpc::ServerContext* ctx, const v1::BeginCheckpointRequest* req,
                               v1::BeginCheckpointResponse* resp) override;
  grpc::Status UploadChunks(grpc::ServerContext* ctx, grpc::ServerReader<ShardChunkIn>* reader,
                            v1::UploadShardResponse* resp) override;
  grpc::Status CommitCheckpoint(grpc::ServerContext* ctx, const v1::CommitCheckpointRequest* req,
                                v1::CommitCheckpointResponse* resp) override;
  grpc::Status AbortCheckpoint(grpc::ServerContext* ctx, const v1::AbortCheckpointRequest* req,
                               v1::AbortCheckpointResponse* resp) override;
  grpc::Status ListCheckpoints(grpc::ServerContext* ctx, const v1::ListCheckpointsRequest* req,
                               v1::ListCheckpointsResponse* resp) override;
  grpc::Status GetCheckpoint(grpc::ServerContext* ctx, const v1::GetCheckpointRequest* req,
                             v1::CheckpointInfo* resp) override;
  grpc::Status DownloadChunks(grpc::ServerContext* ctx, RangeStreamer* stream) override;
  grpc::Status RequestCheckpoint(grpc::ServerContext* ctx, const v1::RequestCheckpointRequest* req,
                                 v1::RequestCheckpointResponse* resp) override;
  grpc::Status GetCheckpointTrigger(grpc::ServerContext* ctx,
                                    const v1::GetCheckpointTriggerRequest* req,
                                    v1::GetCheckpointTriggerResponse* resp) override;
  // The local-read socket GetCheckpoint names (CheckpointInfo
  // .local_read_socket; local_read_server.h); "" = none. Thread-safe.
  void SetLocalReadSocket(std::string path) {
    absl::MutexLock lock(&local_mu_);
    local_read_socket_ = std::move(path);
  }

 private:
  // For a write to pending `checkpoint_id` as `rank`: ABORTED when it was
  // begun in another generation than the writer's, PERMISSION_DENIED when
  // `rank` is not the writer's ([Note: bound checkpoint writes]).
  absl::Status CheckPendingWriter(const std::optional<CheckpointWriter>& writer,
                                  const std::string& checkpoint_id, absl::string_view what,
                                  int rank) const;

  CheckpointStore* const store_;
  StreamLimits* const streams_;
  std::atomic<int64_t> request_seq_{0};
  absl::Mutex local_mu_;
  std::string local_read_socket_ ABSL_GUARDED_BY(local_mu_);
};

}  // namespace zeroshard::server
