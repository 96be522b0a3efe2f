// CheckpointClient's restore side: DownloadRange streams of the ranges the
// current shard plan needs from a committed checkpoint or the job's model
// weights (checkpoint_client.h).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/dtype.h"
#include "common/formats/xxhash_copy.h"
#include "common/parallel_for.h"
#include "common/rpc/chunk_frame.h"
#include "common/rpc/plan_proto.h"
#include "common/status_macros.h"
#include "grpcpp/impl/rpc_method.h"
#include "grpcpp/support/sync_stream.h"
#include "worker/checkpoint/checkpoint_client.h"
#include "worker/checkpoint/first_error.h"
#include "worker/checkpoint/reshard.h"

namespace zeroshard::checkpoint {

using RangeChunkIn = IncomingChunk<v1::RangeChunk>;

namespace {

// The bf16 bits of `frame`'s pieces widened into `out` (exact: bfloat16 is
// fp32's upper half) and added to `hash`, piece by piece while each is in
// cache. A piece may end inside an element: its first byte waits in `low`.
void WidenIntoXxh64(const RangeChunkIn& frame, float* out, Xxh64Stream* hash) {
  int low = -1;  // The pending low byte (little-endian), or -1.
  for (absl::string_view piece : frame.pieces()) {
    hash->Update(piece.data(), piece.size());
    const auto* p = reinterpret_cast<const uint8_t*>(piece.data());
    size_t n = piece.size();
    if (low >= 0 && n > 0) {
      *out++ = Bf16ToFloat(static_cast<bf16>(low | (p[0] << 8)));
      low = -1;
      ++p;
      --n;
    }
    const size_t elems = n / 2;
    for (size_t i = 0; i < elems; ++i) {
      bf16 bits;
      std::memcpy(&bits, p + 2 * i, 2);
      out[i] = Bf16ToFloat(bits);
    }
    out += elems;
    if (n % 2 == 1) low = p[n - 1];
  }
}

// One DownloadRange chunk into dst (the range's first element at dst[0]):
// it must continue the range at `next` and pass its xxhash64; a bf16 one
// (model weights only) is widened to fp32, exactly. DATA_LOSS otherwise.
absl::Status ReceiveChunk(const RangeChunkIn& frame, bool model_weights, ElementRange range,
                          int64_t next, const std::string& unit, float* dst) {
  const v1::RangeChunk& chunk = frame.header();
  const bool is_bf16 = chunk.bf16() && model_weights;  // Only asked for with model weights.
  if (chunk.offset() != next || chunk.length() < 1 ||
      chunk.offset() + chunk.length() > range.end() ||
      static_cast<int64_t>(frame.data_size()) != chunk.length() * (is_bf16 ? 2 : 4)) {
    return absl::DataLossError(absl::StrCat("DownloadRange: chunk at ", chunk.offset(),
                                            " does not continue the range at ", next));
  }
  Xxh64Stream hash;
  float* out = dst + (next - range.offset);
  if (is_bf16) {
    WidenIntoXxh64(frame, out, &hash);
  } else {
    char* to = reinterpret_cast<char*>(out);
    for (absl::string_view piece : frame.pieces()) {
      CopyIntoXxh64(to, piece.data(), piece.size(), &hash);
      to += piece.size();
    }
  }
  if (hash.Digest() != chunk.xxhash64()) {
    return absl::DataLossError(absl::StrCat("DownloadRange: chunk at ", chunk.offset(), " of ",
                                            unit, " failed its xxhash64"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckpointClient::Download(const std::string& job_id, int64_t step,
                                        const std::string& unit, v1::TensorKind kind,
                                        ElementRange range, float* dst, absl::Time deadline,
                                        bool model_weights) {
  if (range.length == 0) return absl::OkStatus();
  v1::DownloadRangeRequest req;
  req.set_model_weights(model_weights);
  req.set_accept_bf16(model_weights);  // BF16 weights travel as their 2 bytes.
  req.set_job_id(job_id);
  req.set_has_step(true);
  req.set_step(step);
  req.set_unit(unit);
  req.set_kind(kind);
  req.set_offset(range.offset);
  req.set_length(range.length);
  req.set_chunk_bytes(options_.chunk_bytes);
  auto ctx = NewContext(deadline);
  // [Note: chunk frames] (UploadStream): each chunk's data is copied from
  // gRPC's slices straight into dst.
  std::unique_ptr<grpc::ClientReader<RangeChunkIn>> reader(
      grpc::internal::ClientReaderFactory<RangeChunkIn>::Create(channel_.get(), download_method_,
                                                                ctx.get(), req));
  RangeChunkIn frame;
  int64_t next = range.offset;
  absl::Status bad;
  while (bad.ok() && reader->Read(&frame)) {
    bad = ReceiveChunk(frame, model_weights, range, next, unit, dst);
    if (bad.ok()) next += frame.header().length();
  }
  if (!bad.ok()) ctx->TryCancel();
  grpc::Status st = reader->Finish();
  ForgetContext(ctx.get());
  ZS_RETURN_IF_ERROR(bad);
  ZS_RETURN_IF_ERROR(FromGrpcStatus(st, "DownloadRange"));
  if (next != range.end()) {
    return absl::DataLossError(absl::StrCat("DownloadRange: got ", next - range.offset, " of ",
                                            range.length, " elements of ", unit));
  }
  return absl::OkStatus();
}

absl::Status CheckpointClient::Restore(const v1::CheckpointInfo& info,
                                       const ShardPlan& current_plan,
                                       const std::vector<RestoreTarget>& targets,
                                       absl::Time deadline) {
  absl::StatusOr<ShardPlan> saved = ShardPlanFromProto(info.plan());
  if (!saved.ok())
    return absl::DataLossError(absl::StrCat("checkpoint plan: ", saved.status().message()));
  return RestoreFrom(*saved, info.summary().job_id(), info.summary().step(), false,
                     info.local_read_socket(), current_plan, targets, deadline);
}

absl::Status CheckpointClient::RestoreModelWeights(const std::string& job_id,
                                                   const ShardPlan& current_plan,
                                                   const std::vector<RestoreTarget>& targets,
                                                   absl::Time deadline) {
  // ListCheckpoints names the local-read socket also before any checkpoint.
  absl::StatusOr<v1::ListCheckpointsResponse> listed = List(job_id, deadline);
  const std::string socket = listed.ok() ? listed->local_read_socket() : "";
  return RestoreFrom(current_plan, job_id, 0, true, socket, current_plan, targets, deadline);
}

std::unique_ptr<LocalReads> CheckpointClient::ConnectLocal(const std::string& socket,
                                                           absl::Time deadline) {
  const char* env = std::getenv("ZEROSHARD_LOCAL_READS");
  if (socket.empty() || !options_.local_reads || (env != nullptr && std::string(env) == "0")) {
    return nullptr;
  }
  const absl::Duration timeout = std::max(absl::Seconds(1), deadline - absl::Now());
  absl::StatusOr<std::unique_ptr<LocalReads>> local =
      LocalReads::Connect(socket, options_.token, timeout);
  if (local.ok()) return *std::move(local);
  // Another host, or another mount namespace: DownloadRange, as designed.
  if (!local_fallback_said_.exchange(true)) {
    std::fprintf(stderr, "checkpoint restore through DownloadRange: %s\n",
                 std::string(local.status().message()).c_str());
  }
  return nullptr;
}

absl::Status CheckpointClient::RestoreFrom(const ShardPlan& saved, const std::string& job_id,
                                           int64_t step, bool model_weights,
                                           const std::string& local_socket,
                                           const ShardPlan& current_plan,
                                           const std::vector<RestoreTarget>& targets,
                                           absl::Time deadline) {
  // Every target is planned (and checked) before any download starts.
  std::vector<std::pair<const RestoreTarget*, RestoreSegment>> downloads;
  for (const RestoreTarget& t : targets) {
    if (t.dst == nullptr && t.range.length > 0) {
      return absl::InvalidArgumentError(absl::StrCat("restore target ", t.unit, " has a null dst"));
    }
    ZS_ASSIGN_OR_RETURN(std::vector<RestoreSegment> segs,
                        PlanRestore(saved, current_plan, t.unit, t.range));
    for (const RestoreSegment& s : segs) {
      if (s.zero) {
        std::fill(t.dst + s.dst.offset, t.dst + s.dst.offset + s.dst.length, 0.f);
      } else {
        downloads.push_back({&t, s});
      }
    }
  }
  const std::unique_ptr<LocalReads> local = ConnectLocal(local_socket, deadline);
  // One segment: read locally where offered; a local failure (a block that
  // fails its hash included) goes through DownloadRange, where the
  // coordinator verifies the same bytes and drops a damaged checkpoint.
  std::atomic<bool> fallback_said{false};  // One line per Restore.
  auto fetch = [&](const RestoreTarget& t, const RestoreSegment& s) {
    const ElementRange src{s.src_offset, s.dst.length};
    float* dst = t.dst + s.dst.offset;
    const UnitPlan* unit = current_plan.FindUnit(t.unit);
    if (local != nullptr && (!model_weights || unit != nullptr)) {
      absl::Status st = model_weights ? local->ReadModelWeights(job_id, *unit, src, dst)
                                      : local->Read(job_id, step, t.unit, t.kind, src, dst);
      if (st.ok()) return st;
      // Every mismatch is said (DownloadRange then checks the same bytes);
      // other failures once a restore.
      if (absl::IsDataLoss(st) || !fallback_said.exchange(true)) {
        std::fprintf(stderr, "%s; reading it through DownloadRange\n",
                     std::string(st.message()).c_str());
      }
    }
    return Download(job_id, step, t.unit, t.kind, src, dst, deadline, model_weights);
  };
  // [Note: parallel streams] (Upload): the segments on up to options_.streams streams.
  FirstError error;
  ParallelFor(static_cast<int64_t>(downloads.size()), StreamsFor(downloads.size()), 1, 1,
              [&](int, int64_t b, int64_t e) {
                for (int64_t i = b; i < e && error.Get().ok(); ++i) {
                  const auto& [t, s] = downloads[i];
                  error.Note(fetch(*t, s));
                }
              });
  return error.Get();
}

}  // namespace zeroshard::checkpoint
