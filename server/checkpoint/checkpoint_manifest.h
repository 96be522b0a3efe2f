// The on-disk layout of one committed checkpoint and the checks that decide
// whether it may be loaded.
//
// Layout: <checkpoint dir>/step-<8 digits>/ holds one file per (unit, kind),
// "u<4-digit unit index>.<kind>.bin", the unit's whole padded flat buffer as
// little-endian fp32, and manifest.json (v1::CheckpointManifest in proto3 JSON).
// The manifest is written last and atomically, so a directory without one is
// a partial checkpoint. Pure functions plus file reads; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/shard_plan.h"
#include "zeroshard/v1/checkpoint.pb.h"

namespace zeroshard::server {

inline constexpr char kManifestName[] = "manifest.json";
inline constexpr int64_t kMaxManifestBytes = int64_t{256} << 20;
// CheckpointFile.block_bytes of the checkpoints this store writes: the
// default DownloadRange chunk, so a restore's chunk is one block and its
// hash both verifies the disk's bytes and travels with them (bytes).
inline constexpr int64_t kCheckpointBlockBytes = int64_t{1} << 20;
// The largest CheckpointFile.block_bytes a manifest may record: a restore
// reads a block whole into memory where a range covers part of it.
inline constexpr int64_t kMaxCheckpointBlockBytes = int64_t{64} << 20;
inline constexpr v1::TensorKind kAllKinds[] = {v1::TENSOR_KIND_MASTER, v1::TENSOR_KIND_EXP_AVG,
                                               v1::TENSOR_KIND_EXP_AVG_SQ};

absl::string_view TensorKindName(v1::TensorKind kind);  // "master", "exp_avg", "exp_avg_sq"
std::string CheckpointIdForStep(int64_t step);          // "step-00000006"
// Parses "step-<digits>"; INVALID_ARGUMENT otherwise.
absl::StatusOr<int64_t> StepFromCheckpointId(absl::string_view id);
// The step of a pending id "step-NNNNNNNN.<attempt>.<nonce>" (or of a
// committed id); INVALID_ARGUMENT otherwise.
absl::StatusOr<int64_t> StepFromPendingId(absl::string_view id);
inline constexpr char kPendingPrefix[] = ".pending-";
inline constexpr char kReplacedPrefix[] = ".replaced-";
std::string DataFileName(int unit_index, v1::TensorKind kind);

absl::StatusOr<std::string> ManifestToJson(const v1::CheckpointManifest& manifest);

// A manifest read and checked against its directory.
struct LoadedManifest {
  std::string dir;  // The checkpoint's own directory.
  v1::CheckpointManifest manifest;
  ShardPlan plan;  // Parsed from manifest.plan.
};

// How much of the files' contents LoadManifest checks against the hashes.
enum class HashCheck {
  kNone,   // Sizes and the hashes' shape only.
  kWhole,  // Every file read now: its xxhash64 and each recorded block hash.
  // Files with block hashes as kNone (their reader verifies each block as
  // it reads it: CheckpointStore::ReadRange); the others as kWhole.
  kDeferBlocks,
};

// Reads <ckpt_dir>/manifest.json and checks it against the files: the plan is
// self-consistent, every unit has exactly one file per kind, each file exists
// with bytes == padded_numel * 4 and as many block hashes as blocks, and its
// contents match the hashes as far as `check` says. DATA_LOSS naming the
// directory and the first mismatch (file, and block where there is one)
// otherwise; NOT_FOUND when there is no manifest.
absl::StatusOr<LoadedManifest> LoadManifest(const std::string& ckpt_dir, HashCheck check);

// Resolves a user-supplied path: a checkpoint's own directory (it holds
// manifest.json) or a checkpoint dir, meaning its latest committed checkpoint
// whose manifest loads (size checks only). Read-only: never cleans up.
// NOT_FOUND when none.
absl::StatusOr<std::string> ResolveCheckpointDir(const std::string& path);

}  // namespace zeroshard::server
