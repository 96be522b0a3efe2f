// Worker-side checkpoint client: uploads this rank's shard of fp32 master
// weights and AdamW moments to the coordinator's CheckpointService and
// downloads whatever ranges the engine asks for on restore.
//
// Save (per rank, at the same step on every rank):
//   BeginCheckpoint -> UploadShard (chunks of Options::chunk_bytes, each with
//   its XXH64, on Options::streams concurrent streams) -> CommitCheckpoint.
//   The checkpoint commits when the last rank's data lands;
//   SaveResult::committed says whether this call saw it.
//   Pass the rank's SaveRanges(plan, rank) (reshard.h) of each unit: at
//   stage 0, where the engine holds everything, still only the shard.
// SaveAsync copies the shard into a host snapshot before returning, so
// training may overwrite its buffers at once; the upload runs on a
// background thread; SaveHandle::Wait(timeout) joins it.
// Restore: GetInfo (latest or a step) gives the checkpoint's plan and trainer
// state; Restore fills each target (unit, kind, range under the CURRENT plan,
// destination) with downloaded data and zero padding (PlanRestore), the
// downloads on Options::streams concurrent streams.
//
// Every call has a deadline; gRPC errors keep their codes (UNAVAILABLE:
// coordinator unreachable, retry; DATA_LOSS: a chunk or file failed its
// checksum) and name the RPC. Thread-safe: distinct calls may run
// concurrently; a SaveHandle is used by one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/rpc/rpc_security.h"
#include "common/rpc/unary_call.h"
#include "common/shard_plan.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/impl/rpc_method.h"
#include "worker/checkpoint/local_reads.h"
#include "zeroshard/v1/checkpoint.grpc.pb.h"

namespace zeroshard::checkpoint {

struct CheckpointClientOptions {
  // Data bytes per uploaded chunk; a multiple of 4 in [4, 4 MiB - 64 KiB]
  // (gRPC's default message limit is 4 MiB). Also the download chunk size.
  int64_t chunk_bytes = 1 << 20;
  // Streams a Save uploads on and a Restore downloads on at once, in [1, 64]
  // ([Note: parallel streams] in checkpoint_client.cc). The coordinator
  // allows 256 open streams per caller host.
  int streams = 4;
  // Restore reads a checkpoint's ranges from its files itself where the
  // coordinator offers local reads on a socket this process can reach
  // (local_reads.h; CheckpointInfo.local_read_socket); false, or
  // ZEROSHARD_LOCAL_READS=0 in the environment, always uses DownloadRange.
  bool local_reads = true;
  // The bearer token local-read requests carry (the one the channel sends;
  // "" when the coordinator needs none). Connect fills it from its security.
  std::string token;
};

// One unit's slice of this rank's state, as the engine holds it: three
// buffers of `range.length` fp32 elements, element i being global element
// range.offset + i of the unit's padded flat buffer.
struct UnitShardView {
  std::string unit;
  ElementRange range;
  const float* master = nullptr;
  const float* exp_avg = nullptr;
  const float* exp_avg_sq = nullptr;
};

struct SaveMetadata {
  std::string job_id;
  int64_t step = 0;  // The checkpoint's step (its id is step-NNNNNNNN).
  int rank = 0;
  int stage = 0;   // ZeRO stage the job runs at.
  ShardPlan plan;  // The current plan; world_size = ranks saving.
  std::string model_config_json;
  int64_t optimizer_step = 0;  // AdamW steps taken.
  int64_t data_cursor = 0;     // Global samples consumed.
  std::string rng_state;       // This rank's RNG state, <= 64 KiB.
  // Same on every rank of one save; pass the generation, so a save restarted
  // by a new generation replaces a cut-off one instead of mixing with it.
  uint64_t attempt = 0;
};

struct SaveResult {
  // The pending checkpoint's id; "" when the step was committed already
  // (BeginCheckpoint's ALREADY_EXISTS: committed, 0 bytes uploaded).
  std::string checkpoint_id;
  bool committed = false;          // Whether the checkpoint is committed yet.
  std::vector<int> missing_ranks;  // Ranks still uploading when !committed.
  int64_t bytes = 0;               // Data bytes this rank uploaded.
};

// A destination for Restore: `range` of `unit`'s `kind` under the current
// plan, written to `dst` (range.length fp32 elements).
struct RestoreTarget {
  std::string unit;
  v1::TensorKind kind = v1::TENSOR_KIND_MASTER;
  ElementRange range;
  float* dst = nullptr;
};

class SaveHandle;

class CheckpointClient {
 public:
  using Options = CheckpointClientOptions;
  CheckpointClient(std::shared_ptr<grpc::Channel> channel, Options options = {});
  // "HOST:PORT" with `security`'s TLS and token (rpc_security.h); a worker
  // passes its CoordinatorClient's channel to the constructor instead, so
  // uploads carry its member credential. INVALID_ARGUMENT if the target is
  // empty, options.chunk_bytes is out of range or a TLS/token file is bad.
  static absl::StatusOr<std::unique_ptr<CheckpointClient>> Connect(
      const std::string& target, Options options = {}, const ClientSecurity& security = {});

  // Uploads `shards` (this rank's) and commits. INVALID_ARGUMENT for a view
  // whose unit is not in meta.plan, whose range leaves the rank's shard, or
  // with a null buffer.
  absl::StatusOr<SaveResult> Save(const SaveMetadata& meta,
                                  const std::vector<UnitShardView>& shards, absl::Time deadline);
  // Snapshots `shards` into host memory, then Save()s on a background thread.
  // Validation errors are reported by the handle's Wait.
  std::unique_ptr<SaveHandle> SaveAsync(const SaveMetadata& meta,
                                        const std::vector<UnitShardView>& shards,
                                        absl::Time deadline);

  absl::StatusOr<v1::ListCheckpointsResponse> List(const std::string& job_id, absl::Time deadline);
  // The latest committed checkpoint, or the one at `step`. NOT_FOUND if none.
  absl::StatusOr<v1::CheckpointInfo> GetInfo(const std::string& job_id, std::optional<int64_t> step,
                                             absl::Time deadline);
  // Downloads [range) of unit/kind of the checkpoint at `step` into `dst`,
  // verifying each chunk's XXH64 (DATA_LOSS on mismatch) as it is copied in.
  // On an error, what `dst` holds is unspecified.
  // `model_weights`: from the job's model directory, not a checkpoint
  // (checkpoint.proto DownloadRangeRequest.model_weights; `step` ignored).
  absl::Status Download(const std::string& job_id, int64_t step, const std::string& unit,
                        v1::TensorKind kind, ElementRange range, float* dst, absl::Time deadline,
                        bool model_weights = false);
  // Fills every target from checkpoint `info` under `current_plan`.
  absl::Status Restore(const v1::CheckpointInfo& info, const ShardPlan& current_plan,
                       const std::vector<RestoreTarget>& targets, absl::Time deadline);
  // Fills every (master) target with the job's model-directory weights
  // under `current_plan`: only the targets' ranges travel, padding is zero.
  absl::Status RestoreModelWeights(const std::string& job_id, const ShardPlan& current_plan,
                                   const std::vector<RestoreTarget>& targets, absl::Time deadline);

  // "zeroshard checkpoint now": bumps the coordinator's request counter.
  absl::StatusOr<int64_t> RequestCheckpoint(absl::Time deadline);
  // The counter; a trainer saves at its next step when it grows.
  absl::StatusOr<int64_t> GetCheckpointTrigger(absl::Time deadline);

  // Cancels in-flight calls (from another thread; e.g. at shutdown); they
  // and every later call return CANCELLED.
  void CancelAll();

 private:
  // Restore's work: targets under `current_plan` from data saved under
  // `saved` (a checkpoint's plan, or the current one for model weights).
  // `local_socket`: CheckpointInfo.local_read_socket ("" for none).
  absl::Status RestoreFrom(const ShardPlan& saved, const std::string& job_id, int64_t step,
                           bool model_weights, const std::string& local_socket,
                           const ShardPlan& current_plan, const std::vector<RestoreTarget>& targets,
                           absl::Time deadline);
  // Local reads through `socket` when options and the environment allow and
  // it can be reached; null otherwise (the reason printed once per client).
  std::unique_ptr<LocalReads> ConnectLocal(const std::string& socket, absl::Time deadline);
  std::unique_ptr<grpc::ClientContext> NewContext(absl::Time deadline);
  void ForgetContext(grpc::ClientContext* ctx);
  // A unary call through a registered context, so CancelAll reaches it.
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(UnaryMethod<v1::CheckpointService::Stub, Request, Response> method,
                                const Request& request, absl::Time deadline, const char* rpc_name) {
    std::unique_ptr<grpc::ClientContext> ctx = NewContext(deadline);
    absl::StatusOr<Response> response =
        UnaryCall(stub_.get(), method, request, ctx.get(), rpc_name);
    ForgetContext(ctx.get());
    return response;
  }
  absl::Status Upload(const std::string& id, const SaveMetadata& meta,
                      const std::vector<UnitShardView>& shards, absl::Time deadline,
                      int64_t* bytes);
  // One tensor kind of one view: what an upload stream sends.
  struct UploadPiece {
    const UnitShardView* view;
    v1::TensorKind kind;
    const float* data;
  };
  // Streams for `jobs` pieces: options_.streams (clamped to [1, 64]), at most one per piece.
  int StreamsFor(size_t jobs) const;
  // One UploadShard stream of `pieces`, in chunks; adds the bytes sent.
  absl::Status UploadStream(const std::string& id, int rank, const std::vector<UploadPiece>& pieces,
                            absl::Time deadline, int64_t* bytes);

  std::shared_ptr<grpc::Channel> channel_;  // For the data streams (chunk frames).
  const grpc::internal::RpcMethod upload_method_;
  const grpc::internal::RpcMethod download_method_;
  std::unique_ptr<v1::CheckpointService::Stub> stub_;
  const Options options_;
  absl::Mutex mu_;
  std::vector<grpc::ClientContext*> live_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> local_fallback_said_{false};  // A fallback to DownloadRange was printed.
};

// A background save. Destroying it joins the thread, which ends by the
// save's deadline at the latest.
class SaveHandle {
 public:
  ~SaveHandle();
  // Waits up to `timeout` for the save; DEADLINE_EXCEEDED if still running
  // (it goes on; call Wait again), else the save's result.
  absl::StatusOr<SaveResult> Wait(absl::Duration timeout);
  bool Done() const { return done_.HasBeenNotified(); }

 private:
  friend class CheckpointClient;
  SaveHandle() = default;
  CheckpointClient* client_ = nullptr;
  // Owned copy of the shard data the views point into.
  std::vector<std::vector<float>> snapshot_;
  std::vector<UnitShardView> views_;
  SaveMetadata meta_;
  absl::StatusOr<SaveResult> result_;
  absl::Notification done_;
  std::thread thread_;
};

}  // namespace zeroshard::checkpoint
