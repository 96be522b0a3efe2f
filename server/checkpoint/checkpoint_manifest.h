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

// Reads <ckpt_dir>/manifest.json and checks it against the files: the plan is
// self-consistent, every unit has exactly one file per kind, each file exists
// with bytes == padded_numel * 4, and, when `verify_hashes`, each file's
// XXH64 equals the manifest's. DATA_LOSS naming the directory and the first
// mismatch otherwise; NOT_FOUND when there is no manifest.
absl::StatusOr<LoadedManifest> LoadManifest(const std::string& ckpt_dir, bool verify_hashes);

// Resolves a user-supplied path: a checkpoint's own directory (it holds
// manifest.json) or a checkpoint dir, meaning its latest committed checkpoint
// whose manifest loads (size checks only). Read-only: never cleans up.
// NOT_FOUND when none.
absl::StatusOr<std::string> ResolveCheckpointDir(const std::string& path);

}  // namespace zeroshard::server
