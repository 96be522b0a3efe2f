#include "server/checkpoint/framed_checkpoint_service.h"

#include "grpcpp/support/method_handler.h"

namespace zeroshard::server {
namespace {

// Indices of the two streams in checkpoint.proto's service (the generated
// code registers methods in declaration order). framed_checkpoint_test
// calls both through the generated stub, so a reordered proto fails there.
constexpr int kUploadShardIndex = 1;
constexpr int kDownloadRangeIndex = 6;

}  // namespace

FramedCheckpointService::FramedCheckpointService() {
  // gRPC's streamed-method hook: the handler is replaced and the method
  // served as a bidirectional stream, which on the server differs from a
  // client or server stream only in that no request is read before the
  // handler runs (the split streamer reads DownloadRange's one request).
  MarkMethodStreamed(
      kUploadShardIndex,
      new grpc::internal::ClientStreamingHandler<FramedCheckpointService, ShardChunkIn,
                                                 v1::UploadShardResponse>(
          [](FramedCheckpointService* self, grpc::ServerContext* ctx,
             grpc::ServerReader<ShardChunkIn>* reader,
             v1::UploadShardResponse* resp) { return self->UploadChunks(ctx, reader, resp); },
          this));
  MarkMethodStreamed(
      kDownloadRangeIndex,
      new grpc::internal::SplitServerStreamingHandler<v1::DownloadRangeRequest, RangeChunkOut>(
          [this](grpc::ServerContext* ctx, RangeStreamer* stream) {
            return DownloadChunks(ctx, stream);
          }));
}

}  // namespace zeroshard::server
