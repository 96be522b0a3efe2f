// The generated CheckpointService::Service with its two data streams,
// UploadShard and DownloadRange, moving chunk frames (common/rpc/
// chunk_frame.h) instead of ShardChunk / RangeChunk messages: the data
// stays in gRPC's slices from the socket to the file and from the file to
// the socket, one memory pass fewer on each side than a message's parse or
// serialisation. The wire bytes are unchanged, so every client (the
// generated stub, grpcio) talks to it as before.
//
// Derive from this instead of v1::CheckpointService::Service and implement
// UploadChunks and DownloadChunks; the generated UploadShard and
// DownloadRange are not called. Errors and thread safety: as the generated
// service's (gRPC calls handlers from many threads).
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/rpc/chunk_frame.h"
#include "grpcpp/support/sync_stream.h"
#include "zeroshard/v1/checkpoint.grpc.pb.h"

namespace zeroshard::server {

using ShardChunkIn = IncomingChunk<v1::ShardChunk>;
using RangeChunkOut = OutgoingChunk<v1::RangeChunk>;
// DownloadRange's stream: Read the one request, then Write chunks.
using RangeStreamer = grpc::ServerSplitStreamer<v1::DownloadRangeRequest, RangeChunkOut>;

// The ranks a checkpoint write may act as (issue 40): the caller's ranks
// (one, but a process may prove several members), their generation and its
// world size.
struct CheckpointWriter {
  uint64_t generation = 0;
  std::vector<int> ranks;
  int world_size = 0;
  int64_t job_step = 0;    // No save commits a step above it.
  uint64_t member_id = 0;  // A verified member: its streams count against it, not its host.
};
// Says which rank a call of `method` writes as: nullopt when it writes for
// any rank (an admin), an error (PERMISSION_DENIED) when it may not write.
using CheckpointWriterCheck = std::function<absl::StatusOr<std::optional<CheckpointWriter>>(
    const grpc::ServerContextBase& ctx, absl::string_view method)>;

class FramedCheckpointService : public v1::CheckpointService::Service {
 public:
  FramedCheckpointService();

  // Binds Begin, Upload, Commit and Abort to the caller's rank (the
  // coordinator's guard sets it before serving). Unset: every write is
  // unbound, as for an admin (in-process tests of the store).
  void set_writer_check(CheckpointWriterCheck check) { writer_check_ = std::move(check); }

  // UploadShard: reads the stream's chunks until it ends.
  virtual grpc::Status UploadChunks(grpc::ServerContext* ctx,
                                    grpc::ServerReader<ShardChunkIn>* reader,
                                    v1::UploadShardResponse* resp) = 0;
  // DownloadRange: reads the request from `stream`, then writes the chunks.
  virtual grpc::Status DownloadChunks(grpc::ServerContext* ctx, RangeStreamer* stream) = 0;

 protected:
  // writer_check_'s answer, nullopt when none is set.
  absl::StatusOr<std::optional<CheckpointWriter>> WriterOf(const grpc::ServerContextBase& ctx,
                                                           absl::string_view method) const {
    if (!writer_check_) return std::nullopt;
    return writer_check_(ctx, method);
  }

 private:
  CheckpointWriterCheck writer_check_;
};

}  // namespace zeroshard::server
