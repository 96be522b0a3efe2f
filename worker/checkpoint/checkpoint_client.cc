#include "worker/checkpoint/checkpoint_client.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/dtype.h"
#include "common/formats/xxhash_copy.h"
#include "common/parallel_for.h"
#include "common/rpc/chunk_frame.h"
#include "common/rpc/plan_proto.h"
#include "common/rpc/unary_call.h"
#include "common/status_macros.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/sync_stream.h"
#include "worker/checkpoint/first_error.h"
#include "worker/checkpoint/reshard.h"

namespace zeroshard::checkpoint {
namespace {

constexpr int64_t kMaxChunkBytes = (4 << 20) - (64 << 10);
constexpr int kMaxStreams = 64;

using ShardChunkOut = OutgoingChunk<v1::ShardChunk>;

// The service's two data streams, called with chunk frames instead of the
// generated stub's messages (the same names and wire bytes).
constexpr char kUploadShardName[] = "/zeroshard.v1.CheckpointService/UploadShard";
constexpr char kDownloadRangeName[] = "/zeroshard.v1.CheckpointService/DownloadRange";

absl::Status ValidateOptions(const CheckpointClientOptions& o) {
  if (o.chunk_bytes < 4 || o.chunk_bytes > kMaxChunkBytes || o.chunk_bytes % 4 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk_bytes ", o.chunk_bytes, " must be a multiple of 4 in [4, ", kMaxChunkBytes, "]"));
  }
  if (o.streams < 1 || o.streams > kMaxStreams) {
    return absl::InvalidArgumentError(
        absl::StrCat("streams ", o.streams, " is not in [1, ", kMaxStreams, "]"));
  }
  return absl::OkStatus();
}

absl::Status ValidateViews(const SaveMetadata& meta, const std::vector<UnitShardView>& shards) {
  for (const UnitShardView& v : shards) {
    const UnitPlan* u = meta.plan.FindUnit(v.unit);
    if (u == nullptr)
      return absl::InvalidArgumentError(absl::StrCat("unit \"", v.unit, "\" is not in the plan"));
    const ElementRange shard = u->shard(meta.rank);
    if (v.range.length < 0 || v.range.offset < shard.offset || v.range.end() > shard.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "range [", v.range.offset, ", ", v.range.end(), ") of unit ", v.unit, " is outside rank ",
          meta.rank, "'s shard [", shard.offset, ", ", shard.end(), ")"));
    }
    if (v.range.length > 0 && (!v.master || !v.exp_avg || !v.exp_avg_sq)) {
      return absl::InvalidArgumentError(absl::StrCat("unit ", v.unit, " has a null buffer"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

CheckpointClient::CheckpointClient(std::shared_ptr<grpc::Channel> channel, Options options)
    : channel_(channel),
      upload_method_(kUploadShardName, grpc::internal::RpcMethod::CLIENT_STREAMING, channel),
      download_method_(kDownloadRangeName, grpc::internal::RpcMethod::SERVER_STREAMING, channel),
      stub_(v1::CheckpointService::NewStub(std::move(channel))),
      options_(options) {}

absl::StatusOr<std::unique_ptr<CheckpointClient>> CheckpointClient::Connect(
    const std::string& target, Options options, const ClientSecurity& security) {
  if (target.empty()) return absl::InvalidArgumentError("coordinator address is empty");
  ZS_RETURN_IF_ERROR(ValidateOptions(options));
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(16 << 20);
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel, OpenChannel(target, security, args));
  if (options.token.empty()) {
    ZS_ASSIGN_OR_RETURN(std::shared_ptr<CallIdentity> identity, NewCallIdentity(security));
    options.token = identity->token();
  }
  return std::make_unique<CheckpointClient>(std::move(channel), options);
}

std::unique_ptr<grpc::ClientContext> CheckpointClient::NewContext(absl::Time deadline) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(absl::ToChronoTime(deadline));
  absl::MutexLock lock(&mu_);
  if (cancelled_) ctx->TryCancel();
  live_.push_back(ctx.get());
  return ctx;
}

void CheckpointClient::ForgetContext(grpc::ClientContext* ctx) {
  absl::MutexLock lock(&mu_);
  live_.erase(std::remove(live_.begin(), live_.end(), ctx), live_.end());
}

void CheckpointClient::CancelAll() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  for (grpc::ClientContext* ctx : live_) ctx->TryCancel();
}

int CheckpointClient::StreamsFor(size_t jobs) const {
  const int wanted =
      std::clamp(options_.streams, 1, kMaxStreams);  // Constructor options are unchecked.
  return static_cast<int>(std::clamp<size_t>(jobs, 1, static_cast<size_t>(wanted)));
}

absl::Status CheckpointClient::UploadStream(const std::string& id, int rank,
                                            const std::vector<UploadPiece>& pieces,
                                            absl::Time deadline, int64_t* bytes) {
  // [Note: chunk frames] The data goes out as slices over the caller's
  // memory (common/rpc/chunk_frame.h); declared first, so its destructor
  // (which waits until gRPC has let go of every one, sent or dropped) runs
  // after the call's objects are gone, on every path out.
  BorrowedSlices borrowed;
  auto ctx = NewContext(deadline);
  v1::UploadShardResponse resp;
  std::unique_ptr<grpc::ClientWriter<ShardChunkOut>> writer(
      grpc::internal::ClientWriterFactory<ShardChunkOut>::Create(channel_.get(), upload_method_,
                                                                 ctx.get(), &resp));
  const int64_t chunk_elems = options_.chunk_bytes / 4;
  ShardChunkOut chunk;
  chunk.header.set_checkpoint_id(id);
  chunk.header.set_rank(rank);
  chunk.header.set_dtype(v1::DTYPE_FP32);
  bool ok = true;
  for (const UploadPiece& piece : pieces) {
    chunk.header.set_unit(piece.view->unit);
    chunk.header.set_kind(piece.kind);
    const ElementRange range = piece.view->range;
    for (int64_t i = 0; ok && i < range.length; i += chunk_elems) {
      const int64_t n = std::min(chunk_elems, range.length - i);
      const size_t size = static_cast<size_t>(n * 4);
      chunk.header.set_offset(range.offset + i);
      chunk.header.set_length(n);
      chunk.header.set_xxhash64(XXH64(piece.data + i, size, 0));
      chunk.data = borrowed.Borrow(piece.data + i, size);
      ok = writer->Write(chunk);  // false: the stream broke; Finish says why.
      *bytes += n * 4;
    }
  }
  if (ok) writer->WritesDone();
  grpc::Status st = writer->Finish();
  ForgetContext(ctx.get());
  if (st.ok() && !ok) return absl::UnavailableError("UploadShard: stream closed early");
  return FromGrpcStatus(st, "UploadShard");
}

absl::Status CheckpointClient::Upload(const std::string& id, const SaveMetadata& meta,
                                      const std::vector<UnitShardView>& shards, absl::Time deadline,
                                      int64_t* bytes) {
  // [Note: parallel streams] Up to options_.streams streams at once, each
  // with its share of the (unit, kind) pieces: one stream leaves the link
  // idle while either end waits (a scheduler wake-up, a flow-control window,
  // the coordinator's disk); several keep data moving. The server writes
  // chunks at their offsets, so the order across streams does not matter.
  std::vector<UploadPiece> all;
  for (const UnitShardView& v : shards) {
    for (const auto& [kind, data] : {std::pair{v1::TENSOR_KIND_MASTER, v.master},
                                     std::pair{v1::TENSOR_KIND_EXP_AVG, v.exp_avg},
                                     std::pair{v1::TENSOR_KIND_EXP_AVG_SQ, v.exp_avg_sq}}) {
      if (v.range.length > 0) all.push_back({&v, kind, data});
    }
  }
  const int streams = StreamsFor(all.size());
  FirstError error;
  std::vector<int64_t> sent(streams, 0);
  ParallelFor(static_cast<int64_t>(all.size()), streams, 1, 1, [&](int s, int64_t b, int64_t e) {
    error.Note(UploadStream(id, meta.rank,
                            std::vector<UploadPiece>(all.begin() + b, all.begin() + e), deadline,
                            &sent[s]));
  });
  for (int64_t n : sent) *bytes += n;
  return error.Get();
}

absl::StatusOr<SaveResult> CheckpointClient::Save(const SaveMetadata& meta,
                                                  const std::vector<UnitShardView>& shards,
                                                  absl::Time deadline) {
  ZS_RETURN_IF_ERROR(ValidateViews(meta, shards));
  v1::BeginCheckpointRequest begin;
  begin.set_job_id(meta.job_id);
  begin.set_step(meta.step);
  begin.set_rank(meta.rank);
  begin.set_world_size(meta.plan.world_size);
  begin.set_stage(meta.stage);
  begin.set_model_config_json(meta.model_config_json);
  ShardPlanToProto(meta.plan, begin.mutable_plan());
  begin.set_optimizer_step(meta.optimizer_step);
  begin.set_data_cursor(meta.data_cursor);
  begin.set_rng_state(meta.rng_state);
  begin.set_attempt(meta.attempt);
  absl::StatusOr<v1::BeginCheckpointResponse> began =
      Call(&v1::CheckpointService::Stub::BeginCheckpoint, begin, deadline, "BeginCheckpoint");
  SaveResult out;
  // A committed checkpoint is immutable (checkpoint.proto): this step is
  // saved already, by an earlier save of the same state.
  if (absl::IsAlreadyExists(began.status())) {
    out.committed = true;
    return out;
  }
  if (!began.ok()) return began.status();
  out.checkpoint_id = began->checkpoint_id();
  ZS_RETURN_IF_ERROR(Upload(out.checkpoint_id, meta, shards, deadline, &out.bytes));
  v1::CommitCheckpointRequest commit;
  commit.set_checkpoint_id(out.checkpoint_id);
  commit.set_rank(meta.rank);
  ZS_ASSIGN_OR_RETURN(
      v1::CommitCheckpointResponse committed,
      Call(&v1::CheckpointService::Stub::CommitCheckpoint, commit, deadline, "CommitCheckpoint"));
  out.committed = committed.committed();
  out.missing_ranks.assign(committed.missing_ranks().begin(), committed.missing_ranks().end());
  return out;
}

absl::StatusOr<v1::ListCheckpointsResponse> CheckpointClient::List(const std::string& job_id,
                                                                   absl::Time deadline) {
  v1::ListCheckpointsRequest req;
  req.set_job_id(job_id);
  ZS_ASSIGN_OR_RETURN(
      v1::ListCheckpointsResponse resp,
      Call(&v1::CheckpointService::Stub::ListCheckpoints, req, deadline, "ListCheckpoints"));
  return resp;
}

absl::StatusOr<v1::CheckpointInfo> CheckpointClient::GetInfo(const std::string& job_id,
                                                             std::optional<int64_t> step,
                                                             absl::Time deadline) {
  v1::GetCheckpointRequest req;
  req.set_job_id(job_id);
  req.set_has_step(step.has_value());
  req.set_step(step.value_or(0));
  ZS_ASSIGN_OR_RETURN(v1::CheckpointInfo resp, Call(&v1::CheckpointService::Stub::GetCheckpoint,
                                                    req, deadline, "GetCheckpoint"));
  return resp;
}

absl::StatusOr<int64_t> CheckpointClient::RequestCheckpoint(absl::Time deadline) {
  v1::RequestCheckpointRequest req;
  ZS_ASSIGN_OR_RETURN(
      v1::RequestCheckpointResponse resp,
      Call(&v1::CheckpointService::Stub::RequestCheckpoint, req, deadline, "RequestCheckpoint"));
  return resp.request_seq();
}

absl::StatusOr<int64_t> CheckpointClient::GetCheckpointTrigger(absl::Time deadline) {
  v1::GetCheckpointTriggerRequest req;
  ZS_ASSIGN_OR_RETURN(v1::GetCheckpointTriggerResponse resp,
                      Call(&v1::CheckpointService::Stub::GetCheckpointTrigger, req, deadline,
                           "GetCheckpointTrigger"));
  return resp.request_seq();
}

}  // namespace zeroshard::checkpoint
