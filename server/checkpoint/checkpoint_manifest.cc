#include "server/checkpoint/checkpoint_manifest.h"

#include <cstdio>
#include <filesystem>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/rpc/plan_proto.h"
#include "common/status_macros.h"
#include "google/protobuf/util/json_util.h"
#include "server/checkpoint/checkpoint_files.h"

namespace zeroshard::server {
namespace fs = std::filesystem;

absl::string_view TensorKindName(v1::TensorKind kind) {
  switch (kind) {
    case v1::TENSOR_KIND_MASTER:
      return "master";
    case v1::TENSOR_KIND_EXP_AVG:
      return "exp_avg";
    case v1::TENSOR_KIND_EXP_AVG_SQ:
      return "exp_avg_sq";
    default:
      return "unspecified";
  }
}

std::string CheckpointIdForStep(int64_t step) { return absl::StrFormat("step-%08d", step); }

absl::StatusOr<int64_t> StepFromCheckpointId(absl::string_view id) {
  int64_t step = -1;
  if (!absl::StartsWith(id, "step-") || !absl::SimpleAtoi(id.substr(5), &step) || step < 0 ||
      CheckpointIdForStep(step) != id) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint_id \"", id, "\" is not of the form step-NNNNNNNN"));
  }
  return step;
}

absl::StatusOr<int64_t> StepFromPendingId(absl::string_view id) {
  return StepFromCheckpointId(id.substr(0, id.find('.')));
}

std::string DataFileName(int unit_index, v1::TensorKind kind) {
  return absl::StrFormat("u%04d.%s.bin", unit_index, TensorKindName(kind));
}

absl::StatusOr<std::string> ManifestToJson(const v1::CheckpointManifest& manifest) {
  std::string out;
  google::protobuf::util::JsonPrintOptions opts;
  opts.add_whitespace = true;
  opts.preserve_proto_field_names = true;
  auto st = google::protobuf::util::MessageToJsonString(manifest, &out, opts);
  if (!st.ok()) return absl::InternalError(absl::StrCat("manifest to JSON: ", st.ToString()));
  return out;
}

namespace {

absl::Status Mismatch(const std::string& dir, absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat("checkpoint ", dir, ": manifest does not match its files: ", what));
}

// The block hashes' shape: none, or ceil(bytes / block_bytes) of them with
// block_bytes a multiple of 4 in [4, kMaxCheckpointBlockBytes] (a reader
// holds one block per stream).
absl::Status CheckBlockShape(const std::string& dir, const v1::CheckpointFile& f) {
  const int64_t b = f.block_bytes();
  const bool sized = b == 0 || (b > 0 && b <= kMaxCheckpointBlockBytes && b % 4 == 0);
  const int64_t want = sized && b > 0 ? f.bytes() / b + (f.bytes() % b != 0 ? 1 : 0) : 0;
  if (!sized || f.block_xxhash64_size() != want) {
    return Mismatch(dir, absl::StrCat("file ", f.path(), " records ", f.block_xxhash64_size(),
                                      " block hashes of ", b, " bytes for ", f.bytes(), " bytes"));
  }
  return absl::OkStatus();
}

// Reads the file at `path` and compares its hashes with f's.
absl::Status VerifyFileHashes(const std::string& dir, const std::string& path,
                              const v1::CheckpointFile& f) {
  ZS_ASSIGN_OR_RETURN(const FileHashes h, HashFileBlocks(path, f.block_bytes()));
  for (int i = 0; i < f.block_xxhash64_size() && i < static_cast<int>(h.blocks.size()); ++i) {
    if (h.blocks[i] != f.block_xxhash64(i)) {
      return Mismatch(
          dir, absl::StrFormat("file %s block %d has xxhash64 %016x, manifest says %016x", f.path(),
                               i, h.blocks[i], f.block_xxhash64(i)));
    }
  }
  if (h.whole != f.xxhash64()) {
    return Mismatch(dir, absl::StrFormat("file %s has xxhash64 %016x, manifest says %016x",
                                         f.path(), h.whole, f.xxhash64()));
  }
  return absl::OkStatus();
}

// Every unit has exactly one file per kind, sized to its padded buffer.
absl::Status CheckFiles(const std::string& dir, const v1::CheckpointManifest& m,
                        const ShardPlan& plan, HashCheck check) {
  std::set<std::pair<std::string, int>> seen;
  for (const v1::CheckpointFile& f : m.files()) {
    const UnitPlan* unit = plan.FindUnit(f.unit());
    if (unit == nullptr)
      return Mismatch(dir,
                      absl::StrCat("file ", f.path(), " names unknown unit \"", f.unit(), "\""));
    if (f.path().empty() || f.path().find('/') != std::string::npos || f.path()[0] == '.') {
      return Mismatch(dir, absl::StrCat("file path \"", f.path(), "\" is not a plain file name"));
    }
    if (!seen.insert({f.unit(), static_cast<int>(f.kind())}).second) {
      return Mismatch(dir, absl::StrCat("unit ", f.unit(), " kind ", TensorKindName(f.kind()),
                                        " listed twice"));
    }
    if (f.numel() != unit->padded_numel || f.bytes() != unit->padded_numel * 4) {
      return Mismatch(
          dir, absl::StrCat("file ", f.path(), " records ", f.numel(), " elements / ", f.bytes(),
                            " bytes; the plan says ", unit->padded_numel, " elements"));
    }
    const std::string path = (fs::path(dir) / f.path()).string();
    absl::StatusOr<int64_t> size = FileSize(path);
    if (!size.ok()) return Mismatch(dir, size.status().message());
    if (*size != f.bytes()) {
      return Mismatch(
          dir, absl::StrCat("file ", f.path(), " is ", *size, " bytes, manifest says ", f.bytes()));
    }
    ZS_RETURN_IF_ERROR(CheckBlockShape(dir, f));
    const bool deferred = check == HashCheck::kDeferBlocks && f.block_bytes() > 0;
    if (check != HashCheck::kNone && !deferred) ZS_RETURN_IF_ERROR(VerifyFileHashes(dir, path, f));
  }
  for (const UnitPlan& u : plan.units) {
    for (v1::TensorKind k : kAllKinds) {
      if (!seen.count({u.name, static_cast<int>(k)})) {
        return Mismatch(dir,
                        absl::StrCat("no file for unit ", u.name, " kind ", TensorKindName(k)));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LoadedManifest> LoadManifest(const std::string& ckpt_dir, HashCheck check) {
  const std::string path = (fs::path(ckpt_dir) / kManifestName).string();
  ZS_ASSIGN_OR_RETURN(std::string json, ReadSmallFile(path, kMaxManifestBytes));
  LoadedManifest out;
  out.dir = ckpt_dir;
  google::protobuf::util::JsonParseOptions opts;
  opts.ignore_unknown_fields = true;
  auto st = google::protobuf::util::JsonStringToMessage(json, &out.manifest, opts);
  if (!st.ok())
    return Mismatch(ckpt_dir, absl::StrCat("manifest.json does not parse: ", st.ToString()));
  if (out.manifest.format_version() != 1) {
    return Mismatch(ckpt_dir,
                    absl::StrCat("format_version ", out.manifest.format_version(), " is not 1"));
  }
  absl::StatusOr<ShardPlan> plan = ShardPlanFromProto(out.manifest.plan());
  if (!plan.ok()) return Mismatch(ckpt_dir, absl::StrCat("plan: ", plan.status().message()));
  out.plan = *std::move(plan);
  if (out.plan.world_size != out.manifest.summary().world_size()) {
    return Mismatch(ckpt_dir, "summary.world_size differs from plan.world_size");
  }
  ZS_RETURN_IF_ERROR(CheckFiles(ckpt_dir, out.manifest, out.plan, check));
  return out;
}

absl::StatusOr<std::string> ResolveCheckpointDir(const std::string& path) {
  std::error_code ec;
  if (fs::exists(fs::path(path) / kManifestName, ec)) return path;
  if (!fs::is_directory(path, ec))
    return absl::NotFoundError(absl::StrCat(path, " is not a directory"));
  int64_t best_step = -1;
  std::string best;
  std::string last_error;
  for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) {
    absl::StatusOr<int64_t> step = StepFromCheckpointId(e.path().filename().string());
    if (!step.ok() || *step <= best_step) continue;
    absl::StatusOr<LoadedManifest> m = LoadManifest(e.path().string(), HashCheck::kNone);
    if (!m.ok()) {
      if (!absl::IsNotFound(m.status())) last_error = std::string(m.status().message());
      continue;
    }
    best_step = *step;
    best = e.path().string();
  }
  if (best.empty()) {
    return absl::NotFoundError(absl::StrCat("no committed checkpoint under ", path,
                                            last_error.empty() ? "" : "; rejected: ", last_error));
  }
  return best;
}

}  // namespace zeroshard::server
