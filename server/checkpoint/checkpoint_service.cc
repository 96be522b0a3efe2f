#include "server/checkpoint/checkpoint_service.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rpc/grpc_status.h"

namespace zeroshard::server {

grpc::Status CheckpointServiceImpl::BeginCheckpoint(grpc::ServerContext*,
                                                    const v1::BeginCheckpointRequest* req,
                                                    v1::BeginCheckpointResponse* resp) {
  return Reply(store_->Begin(*req), resp, [](std::string id, v1::BeginCheckpointResponse* out) {
    out->set_checkpoint_id(std::move(id));
  });
}

grpc::Status CheckpointServiceImpl::UploadChunks(grpc::ServerContext* ctx,
                                                 grpc::ServerReader<ShardChunkIn>* reader,
                                                 v1::UploadShardResponse* resp) {
  absl::StatusOr<StreamLimits::Slot> slot =
      StreamLimits::OpenOn(streams_, ctx->peer(), "UploadShard");
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  ShardChunkIn chunk;
  while (reader->Read(&chunk)) {
    absl::Status st = store_->WriteChunk(chunk.header(), chunk.pieces());
    if (!st.ok()) {
      return ToGrpcStatus(absl::Status(
          st.code(), absl::StrCat("chunk ", resp->chunks(), " of this stream: ", st.message())));
    }
    resp->set_chunks(resp->chunks() + 1);
    resp->set_bytes(resp->bytes() + static_cast<int64_t>(chunk.data_size()));
  }
  // A stream that ends early (client gone) leaves what arrived pending and
  // uncommittable until the rank re-sends it; see checkpoint.proto.
  return grpc::Status::OK;
}

grpc::Status CheckpointServiceImpl::CommitCheckpoint(grpc::ServerContext*,
                                                     const v1::CommitCheckpointRequest* req,
                                                     v1::CommitCheckpointResponse* resp) {
  return Reply(store_->Commit(req->checkpoint_id(), req->rank()), resp);
}

grpc::Status CheckpointServiceImpl::AbortCheckpoint(grpc::ServerContext*,
                                                    const v1::AbortCheckpointRequest* req,
                                                    v1::AbortCheckpointResponse*) {
  return ToGrpcStatus(store_->Abort(req->checkpoint_id()));
}

grpc::Status CheckpointServiceImpl::ListCheckpoints(grpc::ServerContext*,
                                                    const v1::ListCheckpointsRequest* req,
                                                    v1::ListCheckpointsResponse* resp) {
  if (absl::Status st = store_->CheckReadJob(req->job_id()); !st.ok()) return ToGrpcStatus(st);
  *resp = store_->List(req->job_id());
  return grpc::Status::OK;
}

grpc::Status CheckpointServiceImpl::GetCheckpoint(grpc::ServerContext*,
                                                  const v1::GetCheckpointRequest* req,
                                                  v1::CheckpointInfo* resp) {
  std::optional<int64_t> step;
  if (req->has_step()) step = req->step();
  return Reply(store_->Get(req->job_id(), step), resp);
}

grpc::Status CheckpointServiceImpl::DownloadChunks(grpc::ServerContext* ctx,
                                                   RangeStreamer* stream) {
  // The slot first: the request is read inside the handler (split streaming),
  // so a caller that never sends one still holds a counted stream.
  absl::StatusOr<StreamLimits::Slot> slot =
      StreamLimits::OpenOn(streams_, ctx->peer(), "DownloadRange");
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  v1::DownloadRangeRequest req;
  if (!stream->Read(&req)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "DownloadRange: the request did not arrive or did not parse");
  }
  // Each chunk is read straight into a slice that gRPC sends as it is.
  RangeChunkOut out;
  CheckpointStore::RangeSink sink{
      [&](size_t bytes) {
        out.data = grpc::Slice(bytes);
        return reinterpret_cast<char*>(const_cast<uint8_t*>(out.data.begin()));
      },
      [&](const v1::RangeChunk& header) {
        out.header = header;
        if (!stream->Write(out)) return absl::CancelledError("DownloadRange: the client went away");
        return absl::OkStatus();
      }};
  return ToGrpcStatus(store_->ReadRange(req, sink));
}

grpc::Status CheckpointServiceImpl::RequestCheckpoint(grpc::ServerContext*,
                                                      const v1::RequestCheckpointRequest* req,
                                                      v1::RequestCheckpointResponse* resp) {
  if (absl::Status st = store_->CheckReadJob(req->job_id()); !st.ok()) return ToGrpcStatus(st);
  resp->set_request_seq(request_seq_.fetch_add(1) + 1);
  return grpc::Status::OK;
}

grpc::Status CheckpointServiceImpl::GetCheckpointTrigger(grpc::ServerContext*,
                                                         const v1::GetCheckpointTriggerRequest* req,
                                                         v1::GetCheckpointTriggerResponse* resp) {
  if (absl::Status st = store_->CheckReadJob(req->job_id()); !st.ok()) return ToGrpcStatus(st);
  resp->set_request_seq(request_seq_.load());
  return grpc::Status::OK;
}

}  // namespace zeroshard::server
