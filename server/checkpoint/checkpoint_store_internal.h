// State shared by checkpoint_store.cc and checkpoint_store_io.cc. Not a
// public interface.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/shard_plan.h"
#include "server/checkpoint/checkpoint_coverage.h"
#include "server/checkpoint/checkpoint_manifest.h"
#include "server/checkpoint/checkpoint_store.h"

namespace zeroshard::server {

inline constexpr int kNumKinds = 3;
inline int KindIndex(v1::TensorKind k) { return static_cast<int>(k) - 1; }
inline bool ValidTensorKind(v1::TensorKind k) {
  return k == v1::TENSOR_KIND_MASTER || k == v1::TENSOR_KIND_EXP_AVG ||
         k == v1::TENSOR_KIND_EXP_AVG_SQ;
}

// A checkpoint being uploaded. Immutable after creation except the fields
// guarded by mu.
struct CheckpointStore::Pending {
  std::string id;   // "step-NNNNNNNN.<attempt>.<nonce>"
  std::string dir;  // <store dir>/.pending-<id>: the temporary name of the whole checkpoint.
  int64_t step = 0;
  uint64_t attempt = 0;
  v1::BeginCheckpointRequest meta;  // First Begin, rng_state cleared.
  ShardPlan plan;
  std::map<std::string, int> unit_index;  // Unit name -> index in plan.units.
  int64_t begun_unix_ms = 0;              // When the first Begin created it.

  std::string DataPath(int unit, v1::TensorKind k) const {
    return dir + "/" + DataFileName(unit, k);
  }
  size_t CoverageKey(int rank, int unit, v1::TensorKind k) const {
    return (static_cast<size_t>(rank) * plan.units.size() + unit) * kNumKinds + KindIndex(k);
  }
  // Records [begin, end) of (rank, unit, kind) as arrived.
  void AddCoverage(int rank, int unit, v1::TensorKind k, int64_t begin, int64_t end)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    coverage[CoverageKey(rank, unit, k)].Add(begin, end);
  }
  bool Covers(int rank, int unit, v1::TensorKind k, int64_t begin, int64_t end) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    auto it = coverage.find(CoverageKey(rank, unit, k));
    return it != coverage.end() && it->second.Covers(begin, end);
  }

  absl::Mutex mu;
  // [Note: sized by the job] Filled as chunks arrive, so memory follows the
  // data received, not the sizes a Begin declared.
  std::map<size_t, IntervalSet> coverage ABSL_GUARDED_BY(mu);
  std::vector<std::string> rng_state ABSL_GUARDED_BY(mu);  // By rank.
  absl::Status failed ABSL_GUARDED_BY(mu);                 // Not OK: this checkpoint never commits.
  bool done = false ABSL_GUARDED_BY(mu);                   // Committed or dropped.
  int64_t bytes_received ABSL_GUARDED_BY(mu) = 0;
  // WriteChunk calls between their checks and their verdict; Commit waits
  // for 0 ([Note: writes in flight], checkpoint_store_io.cc).
  int writes_in_flight ABSL_GUARDED_BY(mu) = 0;
};

// A committed checkpoint in the index.
struct CheckpointStore::Committed {
  int64_t step = 0;
  std::string dir;
  v1::CheckpointSummary summary;

  absl::Mutex mu;
  // Checked before any read: hashes (or just written), or, where files have
  // block hashes, sizes only (each block is verified as it is read).
  bool verified ABSL_GUARDED_BY(mu) = false;
  absl::Status verify_status ABSL_GUARDED_BY(mu);
  std::shared_ptr<const LoadedManifest> loaded ABSL_GUARDED_BY(mu);
};

// The index entry of the committed checkpoint in `dir`, from its manifest
// (hashes not checked here; `verified` says whether they already were).
// Errors from LoadManifest.
absl::StatusOr<std::shared_ptr<CheckpointStore::Committed>> LoadCommitted(int64_t step,
                                                                          const std::string& dir,
                                                                          bool verified);

// The failure reason (kCheckpointFailureReasons) of a file-level error.
inline const char* FailureReasonOf(const absl::Status& s) {
  if (s.code() == absl::StatusCode::kResourceExhausted) return "disk_full";
  if (s.code() == absl::StatusCode::kDataLoss) return "checksum";
  return "io_error";
}

}  // namespace zeroshard::server
