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

#include "common/rpc/chunk_frame.h"
#include "grpcpp/support/sync_stream.h"
#include "zeroshard/v1/checkpoint.grpc.pb.h"

namespace zeroshard::server {

using ShardChunkIn = IncomingChunk<v1::ShardChunk>;
using RangeChunkOut = OutgoingChunk<v1::RangeChunk>;
// DownloadRange's stream: Read the one request, then Write chunks.
using RangeStreamer = grpc::ServerSplitStreamer<v1::DownloadRangeRequest, RangeChunkOut>;

class FramedCheckpointService : public v1::CheckpointService::Service {
 public:
  FramedCheckpointService();

  // UploadShard: reads the stream's chunks until it ends.
  virtual grpc::Status UploadChunks(grpc::ServerContext* ctx,
                                    grpc::ServerReader<ShardChunkIn>* reader,
                                    v1::UploadShardResponse* resp) = 0;
  // DownloadRange: reads the request from `stream`, then writes the chunks.
  virtual grpc::Status DownloadChunks(grpc::ServerContext* ctx, RangeStreamer* stream) = 0;
};

}  // namespace zeroshard::server
