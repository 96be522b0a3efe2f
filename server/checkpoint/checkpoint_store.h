// The coordinator's checkpoint store: receives rank shards chunk by chunk,
// verifies each chunk's XXH64, and commits a checkpoint only when every
// rank's shard of every unit and tensor kind has arrived and verified.
//
// How it works (see proto/zeroshard/v1/checkpoint.proto for the protocol):
//   Begin creates <dir>/.pending-<id>/ (the checkpoint's temporary name) with
//   one pre-sized data file per (unit, kind). Chunks are written at their
//   element offsets (pwrite), so ranks upload concurrently and in any order;
//   each write starts its own disk writeback (sync_file_range), so the disk
//   works while the rest streams in and the commit's fsyncs find little left;
//   per (rank, unit, kind) an IntervalSet records what arrived. Commit, once
//   coverage is complete: fsync and hash each file, write manifest.json
//   atomically inside (write .tmp, fsync, rename, fsync dir), then rename the
//   directory to <dir>/step-NNNNNNNN and fsync <dir>: that rename is the commit
//   point. Re-committing a step swaps the directories atomically
//   (renameat2 RENAME_EXCHANGE). Anything else (.pending-*, a step directory
//   without a manifest) is partial, invisible, and removed at Open.
//   Committed checkpoints are never modified, so a failure (disk full, a bad
//   chunk, a client cut off) cannot harm the previous one.
//   Retention: after a commit, the oldest beyond keep_last are deleted
//   (manifest first, so a crash mid-delete leaves only a partial directory).
//
// One job per checkpoint dir is expected; job_id filters are exact matches.
// Errors: INVALID_ARGUMENT naming the field; NOT_FOUND for an unknown
// checkpoint; DATA_LOSS for a chunk whose checksum fails (the checkpoint then
// never commits) or a manifest that does not match its files;
// RESOURCE_EXHAUSTED "disk full" on ENOSPC (the pending checkpoint is
// dropped); FAILED_PRECONDITION for a Begin that conflicts with the pending
// checkpoint (different plan, stage, ... for the same step and attempt). Thread-safe: any method
// from any thread; uploads of different ranks proceed in parallel.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/formats/hashed_read.h"
#include "common/formats/hf_weights.h"
#include "common/formats/read_only_file.h"
#include "common/shard_plan.h"
#include "server/checkpoint/checkpoint_manifest.h"
#include "server/checkpoint/dir_reaper.h"
#include "zeroshard/v1/checkpoint.pb.h"

namespace zeroshard::server {

// Why a save did not commit (zeroshard_checkpoint_failures_total{reason}):
//   disk_full  a write hit ENOSPC/EDQUOT;  io_error  any other file error;
//   checksum   a chunk's xxhash64 did not match (it can never commit);
//   aborted    a rank called Abort;
//   abandoned  replaced by a newer attempt, superseded by a later commit, or
//              dropped beyond the pending limit.
inline constexpr const char* kCheckpointFailureReasons[] = {"disk_full", "io_error", "checksum",
                                                            "aborted", "abandoned"};

// Told the outcome of every save, once per pending checkpoint, on the thread
// of the call that decided it and without the store's locks held. Must be
// thread-safe.
class CheckpointObserver {
 public:
  virtual ~CheckpointObserver() = default;
  // A checkpoint committed: its step, data bytes on disk, and seconds from
  // its first Begin to the commit.
  virtual void Committed(int64_t step, int64_t bytes, double seconds) = 0;
  // A pending save failed or was dropped; `reason` is one of
  // kCheckpointFailureReasons.
  virtual void Failed(const char* reason) = 0;
};

// The running job as the coordinator knows it: what every Begin must match
// ([Note: sized by the job]). A Begin is refused unless its job_id is this
// job's (FAILED_PRECONDITION naming both), its step passes CheckStep against
// `steps`, its world_size is in [1, max_world_size] (and equals
// `world_size` when its attempt is the running generation; an attempt
// above `generation` is refused), and its plan is exactly the plan of
// `units` at that world size and `alignment`. So a request can only make
// the store allocate what the job's own model needs.
struct CheckpointJob {
  std::string job_id;
  std::vector<UnitSpec> units;  // The job's model; empty until known (Begin refused).
  int64_t alignment = 1;        // Shard plan alignment, elements.
  int max_world_size = 1;       // The job's max_workers.
  int64_t steps = 0;            // The job config's steps; 0 = not set.
  uint64_t generation = 0;      // The newest generation formed.
  int world_size = 0;           // The running generation's; 0 while waiting.
};
// Called on every Begin and every job-scoped read; must be thread-safe.
// An error (e.g. UNAVAILABLE while the coordinator starts) refuses the call.
using CheckpointJobSource = std::function<absl::StatusOr<CheckpointJob>()>;

struct CheckpointStoreOptions {
  std::string dir;    // Created if absent.
  int keep_last = 0;  // Committed checkpoints kept; 0 = all.
  // Fault seam for tests: called before each data write with its size in
  // bytes; a nonzero return is taken as that write's errno (e.g. ENOSPC).
  std::function<int(int64_t bytes)> write_fault;
  // Wall clock in ms since the Unix epoch (commit times); default absl::Now.
  std::function<int64_t()> now_unix_ms;
  // The block size of the block hashes a commit records
  // (CheckpointFile.block_bytes): a multiple of 4 in [4,
  // kMaxCheckpointBlockBytes], bytes. Tests use small ones to cover many
  // blocks with small models.
  int64_t block_bytes = kCheckpointBlockBytes;
};

class CheckpointStore {
 public:
  // Creates the dir, removes partial checkpoints (directories without a
  // manifest), and indexes the committed ones (sizes checked; contents on
  // first read: block by block as ReadRange reads them, or whole first
  // where a manifest has no block hashes). Mismatching ones are reported by
  // List, not loaded.
  static absl::StatusOr<std::unique_ptr<CheckpointStore>> Open(CheckpointStoreOptions options);
  ~CheckpointStore();

  // Creates or joins the pending checkpoint for (req.step, req.attempt);
  // returns its id. Checked against the job first (CheckpointJob). A higher attempt replaces a
  // pending one of the same step; a lower one gets FAILED_PRECONDITION. At most 8 are pending (the
  // oldest steps are dropped); a commit drops pending ones of earlier steps.
  absl::StatusOr<std::string> Begin(const v1::BeginCheckpointRequest& req);
  // Validates and writes one chunk (see ShardChunk in checkpoint.proto).
  absl::Status WriteChunk(const v1::ShardChunk& chunk);
  // The same, with the data given apart from the message (whose own data
  // field is ignored): `pieces` in order, as the service receives them
  // (common/rpc/chunk_frame.h). Each block is hashed and written while
  // still in cache; a chunk whose hash fails has reached only its pending
  // file, and that checkpoint can never commit (a Commit waits for the
  // writes under way to be judged).
  absl::Status WriteChunk(const v1::ShardChunk& header, absl::Span<const absl::string_view> pieces);
  // Records that `rank` finished; commits when all data is present, unless
  // the step is above `max_step` (FAILED_PRECONDITION; it stays pending).
  absl::StatusOr<v1::CommitCheckpointResponse> Commit(
      const std::string& checkpoint_id, int rank,
      int64_t max_step = std::numeric_limits<int64_t>::max());
  // The attempt (generation) and step of a pending checkpoint; NOT_FOUND
  // naming the id when it is not pending.
  struct PendingSave {
    uint64_t attempt = 0;
    int64_t step = 0;
  };
  absl::StatusOr<PendingSave> PendingOf(const std::string& checkpoint_id) const;
  absl::Status Abort(const std::string& checkpoint_id);

  // Every committed checkpoint of job_id ("" = any); the caller checks
  // job_id with CheckReadJob (the service does).
  v1::ListCheckpointsResponse List(absl::string_view job_id) const;
  // The checkpoint at `step`, or the latest (job_id checked by
  // CheckReadJob, as ReadRange's); on first access verifies the whole files
  // of a manifest without block hashes (DATA_LOSS, and it is dropped from
  // the listing, if they fail).
  absl::StatusOr<v1::CheckpointInfo> Get(absl::string_view job_id, std::optional<int64_t> step);
  // Reads req's range in chunks of at most req.chunk_bytes and hands each to
  // `sink` in order; stops at the first error `sink` returns. With block
  // hashes, chunks end at block edges and each block read is verified
  // (ReadVerifiedBlocks).
  absl::Status ReadRange(const v1::DownloadRangeRequest& req,
                         const std::function<absl::Status(const v1::RangeChunk&)>& sink);
  // Where ReadRange puts chunks without a message holding their data
  // (common/formats/hashed_read.h): `buffer(bytes)` returns memory for the
  // next chunk's data, `send(header)` hands on that chunk (header.data()
  // empty; the data is what was just read into the buffer), in order,
  // stopping at its first error.
  using RangeSink = zeroshard::RangeSink;
  absl::Status ReadRange(const v1::DownloadRangeRequest& req, const RangeSink& sink);
  // A committed checkpoint's file opened for a rank on this host that reads
  // it itself (local_read_server.h), found and checked as ReadRange finds
  // it (req's offset, length and chunk_bytes are not used). The reader
  // verifies each block against file.block_xxhash64 (hashed_read.h).
  // FAILED_PRECONDITION for model weights, and for a file without block
  // hashes (ReadRange verifies those whole); ReadRange's other errors.
  struct OpenedFile {
    int64_t step = 0;
    v1::CheckpointFile file;
    ReadOnlyFile in;
  };
  absl::StatusOr<OpenedFile> OpenForLocalRead(const v1::DownloadRangeRequest& req);
  // The job's model weights for a rank on this host that reads them
  // itself: with req.model_file 0 where each tensor lies (`model`), else
  // the descriptor of file model_file - 1 (`fd`, owned by `weights`).
  // FAILED_PRECONDITION when no model weights are served; INVALID_ARGUMENT
  // for a file index out of range; CheckReadJob's errors.
  struct ModelWeightsPart {
    std::shared_ptr<const HfWeights> weights;
    v1::LocalModelWeights model;
    int fd = -1;
  };
  absl::StatusOr<ModelWeightsPart> OpenModelWeightsForLocalRead(const v1::LocalReadRequest& req);
  // The job's initial weights, served by ReadRange for requests with
  // model_weights set (checkpoint.proto DownloadRangeRequest): ranges of each
  // unit's flat buffer under the job's units, read and converted from the
  // model directory's safetensors a chunk at a time, so the coordinator
  // holds one chunk per stream whatever the model's size. Null: none.
  void SetModelWeights(std::shared_ptr<const HfWeights> weights);

  int PendingCount() const;
  // Sets where the running job comes from. Without one (the store on its
  // own, as its unit tests use it) requests are checked only for internal
  // consistency; the coordinator always sets one before serving.
  void SetJobSource(CheckpointJobSource source);
  // INVALID_ARGUMENT / FAILED_PRECONDITION unless job_id is empty or the
  // running job's; OK without a job source.
  absl::Status CheckReadJob(absl::string_view job_id) const;
  // Sets (or, with nullptr, clears) the observer; it must outlive its use.
  void SetObserver(CheckpointObserver* observer) { observer_.store(observer); }
  const std::string& dir() const { return options_.dir; }

  struct Pending;
  struct Committed;

 private:
  // How Begin found the pending checkpoint it joins (checkpoint_store.cc).
  struct Placement {
    std::shared_ptr<Pending> pending;             // Joined or created.
    bool created = false;                         // By this Begin; its files exist.
    std::vector<std::shared_ptr<Pending>> stale;  // Replaced or beyond the limit: to drop.
  };

  explicit CheckpointStore(CheckpointStoreOptions options);
  absl::Status Scan();
  absl::StatusOr<Placement> JoinOrCreate(const v1::BeginCheckpointRequest& req, ShardPlan plan);
  // Under mu_: joins the pending checkpoint of (req.step, req.attempt), or
  // publishes `fresh` (its mu held by the caller) as a new one.
  absl::StatusOr<Placement> Place(const v1::BeginCheckpointRequest& req, ShardPlan plan,
                                  const std::shared_ptr<Pending>& fresh);
  absl::StatusOr<std::shared_ptr<Pending>> FindPending(const std::string& id) const;
  absl::StatusOr<std::shared_ptr<Committed>> FindCommitted(absl::string_view job_id,
                                                           std::optional<int64_t> step);
  absl::Status EnsureVerified(const std::shared_ptr<Committed>& c);
  // The checkpoint and file a read names (job, step or the latest, unit,
  // kind), verified as a first read does; `file` points into `manifest`.
  struct FileOfRead {
    std::shared_ptr<Committed> checkpoint;
    std::shared_ptr<const LoadedManifest> manifest;
    const v1::CheckpointFile* file = nullptr;
  };
  absl::StatusOr<FileOfRead> FindFile(const v1::DownloadRangeRequest& req);
  // The served model weights, after the job check.
  absl::StatusOr<std::shared_ptr<const HfWeights>> ModelWeightsOf(absl::string_view job_id);
  // Drops `c` from the index and lists it as rejected for `why`; returns `why`.
  absl::Status Reject(const std::shared_ptr<Committed>& c, const absl::Status& why);
  absl::Status CheckBlock(const std::shared_ptr<Committed>& c, const v1::CheckpointFile& file,
                          int64_t block, uint64_t hash);
  absl::Status CreateFilesLocked(Pending& p);
  // Commit of an id no longer pending: committed if an earlier Commit did
  // it, else `not_pending`.
  absl::StatusOr<v1::CommitCheckpointResponse> CommittedBefore(
      const std::string& checkpoint_id, const absl::Status& not_pending) const;
  absl::Status CommitLocked(Pending& p);
  // Indexes a just-published checkpoint, applies retention, and drops the
  // pending saves of earlier steps.
  absl::Status Install(const Pending& p);
  absl::Status Publish(Pending& p);
  // `reason`: one of kCheckpointFailureReasons, told to the observer if
  // this is the save's first failure.
  void DropPending(const std::shared_ptr<Pending>& p, const absl::Status& why, const char* reason);
  void NoteFailed(const char* reason) const;
  // A chunk whose data failed its hash: marks `p` failed, ends its write.
  absl::Status RefuseChunk(Pending& p, const v1::ShardChunk& chunk, uint64_t hash);
  // Writes a chunk's data at byte `offset` of `path` (options_.write_fault
  // first) and starts its writeback; returns the data's XXH64.
  absl::StatusOr<uint64_t> WriteChunkData(const std::string& path,
                                          absl::Span<const absl::string_view> pieces,
                                          int64_t offset, int64_t bytes);
  void NoteCommitted(const Pending& p) const;  // After Install.
  // Drops the oldest committed checkpoints beyond keep_last from the index
  // and renames their directories out of sight; returns the new names.
  std::vector<std::string> ApplyRetention() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Makes ApplyRetention's renames durable and queues the directories on
  // reaper_ (no lock held).
  void Reap(std::vector<std::string> retired);

  const CheckpointStoreOptions options_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Pending>> pending_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, std::shared_ptr<Committed>> committed_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> rejected_ ABSL_GUARDED_BY(mu_);
  mutable absl::Mutex job_mu_;
  CheckpointJobSource job_source_ ABSL_GUARDED_BY(job_mu_);
  std::shared_ptr<const HfWeights> model_weights_ ABSL_GUARDED_BY(job_mu_);
  absl::StatusOr<std::optional<CheckpointJob>> Job() const;  // nullopt: no source.
  // ReadRange of the model weights (model_weights_read.cc).
  absl::Status ReadModelWeights(const v1::DownloadRangeRequest& req, int64_t chunk_elems,
                                const RangeSink& sink);
  absl::Status CheckBeginAgainstJob(const v1::BeginCheckpointRequest& req) const;
  std::atomic<CheckpointObserver*> observer_{nullptr};
  DirReaper reaper_;  // Retired checkpoints' removal, off the commit's path.
};

}  // namespace zeroshard::server
