#include "server/checkpoint/checkpoint_service.h"

#include <limits>
#include <optional>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/rpc/grpc_status.h"
#include "common/status_macros.h"

namespace zeroshard::server {
namespace {

// PERMISSION_DENIED unless `rank` is the writer's own (or it writes for all).
absl::Status CheckOwnRank(const std::optional<CheckpointWriter>& writer, absl::string_view what,
                          int rank) {
  if (!writer.has_value() || absl::c_linear_search(writer->ranks, rank)) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat(what, " names rank ", rank, "; the caller is rank ",
                   absl::StrJoin(writer->ranks, ", "), " and writes only its own shard"));
}

// ABORTED when a save of generation `attempt` is not one of the caller's
// generation: the generation it was begun in has ended.
absl::Status CheckAttempt(const std::optional<CheckpointWriter>& writer, absl::string_view what,
                          uint64_t attempt) {
  if (!writer.has_value() || attempt == writer->generation) return absl::OkStatus();
  return absl::AbortedError(absl::StrCat(what, ": a save of generation (attempt) ", attempt,
                                         "; the caller's generation is ", writer->generation));
}

// [Note: bound checkpoint writes] A ranked caller saves only in the running
// generation (attempt = its generation, its world size) and writes only its
// rank's part; it never begins a step already committed (a committed
// checkpoint is immutable, and only an admin may replace it) and never
// commits a step above the job's, the lowest step every rank reported
// (each rank's report of a step lands before it begins that step's save).
absl::Status CheckBegin(const std::optional<CheckpointWriter>& writer,
                        const v1::BeginCheckpointRequest& req, CheckpointStore& store) {
  if (!writer.has_value()) return absl::OkStatus();
  ZS_RETURN_IF_ERROR(CheckAttempt(writer, "BeginCheckpoint", req.attempt()));
  ZS_RETURN_IF_ERROR(CheckOwnRank(writer, "BeginCheckpoint", req.rank()));
  if (req.world_size() != writer->world_size) {
    return absl::PermissionDeniedError(absl::StrCat("BeginCheckpoint: world_size ",
                                                    req.world_size(), " is not generation ",
                                                    writer->generation, "'s ", writer->world_size));
  }
  if (store.Get(req.job_id(), req.step()).ok()) {
    return absl::AlreadyExistsError(absl::StrCat("BeginCheckpoint: step ", req.step(),
                                                 " is committed already; a committed checkpoint "
                                                 "is immutable (only an admin may replace it)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckpointServiceImpl::CheckPendingWriter(
    const std::optional<CheckpointWriter>& writer, const std::string& checkpoint_id,
    absl::string_view what, int rank) const {
  if (!writer.has_value()) return absl::OkStatus();
  absl::StatusOr<CheckpointStore::PendingSave> save = store_->PendingOf(checkpoint_id);
  if (!save.ok()) return absl::OkStatus();  // The store names the unknown id.
  ZS_RETURN_IF_ERROR(CheckAttempt(writer, what, save->attempt));
  return CheckOwnRank(writer, what, rank);
}

grpc::Status CheckpointServiceImpl::BeginCheckpoint(grpc::ServerContext* ctx,
                                                    const v1::BeginCheckpointRequest* req,
                                                    v1::BeginCheckpointResponse* resp) {
  absl::StatusOr<std::optional<CheckpointWriter>> writer = WriterOf(*ctx, "BeginCheckpoint");
  if (!writer.ok()) return ToGrpcStatus(writer.status());
  if (absl::Status st = CheckBegin(*writer, *req, *store_); !st.ok()) return ToGrpcStatus(st);
  return Reply(store_->Begin(*req), resp, [](std::string id, v1::BeginCheckpointResponse* out) {
    out->set_checkpoint_id(std::move(id));
  });
}

grpc::Status CheckpointServiceImpl::UploadChunks(grpc::ServerContext* ctx,
                                                 grpc::ServerReader<ShardChunkIn>* reader,
                                                 v1::UploadShardResponse* resp) {
  absl::StatusOr<std::optional<CheckpointWriter>> writer = WriterOf(*ctx, "UploadShard");
  if (!writer.ok()) return ToGrpcStatus(writer.status());
  absl::StatusOr<StreamLimits::Slot> slot = StreamLimits::OpenOn(
      streams_, ctx->peer(), "UploadShard", writer->has_value() ? (*writer)->member_id : 0);
  if (!slot.ok()) return ToGrpcStatus(slot.status());
  ShardChunkIn chunk;
  while (reader->Read(&chunk)) {
    absl::Status st = CheckPendingWriter(*writer, chunk.header().checkpoint_id(), "UploadShard",
                                         chunk.header().rank());
    if (st.ok()) st = store_->WriteChunk(chunk.header(), chunk.pieces());
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

grpc::Status CheckpointServiceImpl::CommitCheckpoint(grpc::ServerContext* ctx,
                                                     const v1::CommitCheckpointRequest* req,
                                                     v1::CommitCheckpointResponse* resp) {
  absl::StatusOr<std::optional<CheckpointWriter>> writer = WriterOf(*ctx, "CommitCheckpoint");
  if (!writer.ok()) return ToGrpcStatus(writer.status());
  if (absl::Status st =
          CheckPendingWriter(*writer, req->checkpoint_id(), "CommitCheckpoint", req->rank());
      !st.ok()) {
    return ToGrpcStatus(st);
  }
  // A bound writer's save commits no step above the job's.
  const int64_t max_step =
      writer->has_value() ? (*writer)->job_step : std::numeric_limits<int64_t>::max();
  return Reply(store_->Commit(req->checkpoint_id(), req->rank(), max_step), resp);
}

grpc::Status CheckpointServiceImpl::AbortCheckpoint(grpc::ServerContext* ctx,
                                                    const v1::AbortCheckpointRequest* req,
                                                    v1::AbortCheckpointResponse*) {
  absl::StatusOr<std::optional<CheckpointWriter>> writer = WriterOf(*ctx, "AbortCheckpoint");
  if (!writer.ok()) return ToGrpcStatus(writer.status());
  return ToGrpcStatus(store_->Abort(req->checkpoint_id()));
}

grpc::Status CheckpointServiceImpl::ListCheckpoints(grpc::ServerContext*,
                                                    const v1::ListCheckpointsRequest* req,
                                                    v1::ListCheckpointsResponse* resp) {
  if (absl::Status st = store_->CheckReadJob(req->job_id()); !st.ok()) return ToGrpcStatus(st);
  *resp = store_->List(req->job_id());
  absl::MutexLock lock(&local_mu_);
  resp->set_local_read_socket(local_read_socket_);
  return grpc::Status::OK;
}

grpc::Status CheckpointServiceImpl::GetCheckpoint(grpc::ServerContext*,
                                                  const v1::GetCheckpointRequest* req,
                                                  v1::CheckpointInfo* resp) {
  std::optional<int64_t> step;
  if (req->has_step()) step = req->step();
  absl::StatusOr<v1::CheckpointInfo> info = store_->Get(req->job_id(), step);
  if (info.ok()) {
    absl::MutexLock lock(&local_mu_);
    info->set_local_read_socket(local_read_socket_);
  }
  return Reply(std::move(info), resp);
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
