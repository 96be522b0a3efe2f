// State that must survive a coordinator restart (DESIGN.md, "Coordinator"):
// the job id and config, the job's units, the generation counter, the last
// step and loss, a restart counter (which keeps member ids unique across
// restarts), the job's lifecycle (failures counted, and whether and why it
// completed or failed), and committed checkpoints. Everything else is rebuilt from
// heartbeats.
//
// Stored as one JSON file, <state_dir>/coordinator_state.json, replaced
// atomically (write, fsync, rename, fsync dir; common/formats/atomic_file.h) on
// every change, so kill -9 at any moment leaves the old or the new state.
// With an empty state_dir nothing is written (an ephemeral coordinator).
//
// Checkpoints ([Note: checkpoint records]): the checkpoint service records
// a checkpoint with RecordCheckpoint once its manifest is committed; the
// coordinator only stores and lists the records. Checkpoint files and
// manifests themselves belong to the checkpoint service, which may keep its
// own files under <state_dir>/checkpoints/ (this class never touches that
// folder).
//
// Thread safety: every method is thread-safe; writes are serialised, so the
// file always reflects a prefix of the calls.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace zeroshard::server {

struct CheckpointRecord {
  std::string id;             // Unique, non-empty, e.g. "step-000100".
  int64_t step = 0;           // Optimizer steps completed when it was taken.
  std::string manifest_path;  // Where the committed manifest lives.
  std::string metadata_json;  // Opaque to the coordinator (valid JSON or empty).
  int64_t committed_unix_ms = 0;
};

struct DurableSnapshot {
  std::string job_id;
  std::string job_config_json;  // Opaque JSON text handed to workers.
  std::string units_json;       // The job's units (protobuf JSON of v1 UnitSpecs), "" if unknown.
  uint64_t generation = 0;      // Highest generation number ever formed.
  int64_t last_step = 0;
  double last_loss = std::numeric_limits<double>::quiet_NaN();
  uint64_t restarts = 0;                      // Coordinator starts on this state dir, minus one.
  int64_t failures = 0;                       // Failures counted against the job's max_failures.
  std::string job_ended;                      // "completed", "failed", or "" while the job runs.
  std::string job_ended_reason;               // Why it ended ("" while it runs).
  std::vector<CheckpointRecord> checkpoints;  // In commit order.
};

class DurableState {
 public:
  static constexpr const char* kFileName = "coordinator_state.json";

  // Creates `state_dir` if needed, removes stale temporaries of the state
  // file (coordinator_state.json.tmp.*, left by a killed write) and loads
  // the state file if present.
  // Errors: I/O errors naming the path; DATA_LOSS if the file is not valid
  // state JSON.
  static absl::StatusOr<std::unique_ptr<DurableState>> Open(const std::string& state_dir);

  const std::string& dir() const { return dir_; }
  bool persistent() const { return !dir_.empty(); }
  DurableSnapshot Get() const;

  // Each setter writes the file, then updates the snapshot; a failed write
  // (RESOURCE_EXHAUSTED on ENOSPC, or another I/O error) changes neither,
  // so memory and disk always agree.
  absl::Status SetJob(const std::string& job_id, const std::string& job_config_json,
                      uint64_t restarts);
  absl::Status SetUnits(const std::string& units_json);
  absl::Status SetGeneration(uint64_t generation);
  // Keeps the highest step (a late report of an older step is ignored).
  absl::Status SetLastStep(int64_t step, double loss);
  // The job's lifecycle: failures counted, and `ended` ("completed",
  // "failed" or "") with its reason. INVALID_ARGUMENT for another `ended`
  // or negative failures.
  absl::Status SetLifecycle(int64_t failures, const std::string& ended,
                            const std::string& ended_reason);
  // INVALID_ARGUMENT for an empty id, a negative step, or metadata that is
  // not JSON; ALREADY_EXISTS if the id was recorded before.
  absl::Status RecordCheckpoint(const CheckpointRecord& record);
  std::vector<CheckpointRecord> ListCheckpoints() const;

 private:
  explicit DurableState(std::string dir) : dir_(std::move(dir)) {}
  // Writes `next` and, only if that succeeds, makes it the snapshot.
  absl::Status CommitLocked(DurableSnapshot next) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string dir_;
  mutable absl::Mutex mu_;
  DurableSnapshot snapshot_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zeroshard::server
