// CheckpointStore: reads of committed checkpoints (lookup, first-read hash
// verification, ranged reads with read-ahead).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/checkpoint/checkpoint_files.h"
#include "server/checkpoint/checkpoint_store.h"
#include "server/checkpoint/checkpoint_store_internal.h"
#include "server/core/validation.h"

namespace zeroshard::server {
namespace {

constexpr int64_t kDefaultChunkBytes = 1 << 20;
constexpr int64_t kMaxChunkBytes = (4 << 20) - (64 << 10);
// How far ReadRange asks the kernel to read ahead of the chunk it sends:
// enough to keep a disk busy while the chunk before is hashed and sent (bytes).
constexpr int64_t kReadAheadBytes = 16 << 20;

}  // namespace

absl::StatusOr<std::shared_ptr<CheckpointStore::Committed>> CheckpointStore::FindCommitted(
    absl::string_view job_id, std::optional<int64_t> step) {
  absl::MutexLock lock(&mu_);
  for (auto it = committed_.rbegin(); it != committed_.rend(); ++it) {
    if (!job_id.empty() && it->second->summary.job_id() != job_id) continue;
    if (step.has_value() && it->first != *step) continue;
    return it->second;
  }
  return absl::NotFoundError(step.has_value()
                                 ? absl::StrCat("no committed checkpoint at step ", *step)
                                 : std::string("no committed checkpoint"));
}

absl::Status CheckpointStore::EnsureVerified(const std::shared_ptr<Committed>& c) {
  {
    absl::MutexLock clock(&c->mu);
    if (!c->verified) {
      absl::StatusOr<LoadedManifest> m = LoadManifest(c->dir, /*verify_hashes=*/true);
      c->verified = true;
      if (m.ok()) {
        c->loaded = std::make_shared<const LoadedManifest>(*std::move(m));
      } else {
        c->verify_status = m.status();
      }
    }
    if (c->verify_status.ok()) return absl::OkStatus();
  }
  absl::MutexLock lock(&mu_);
  auto it = committed_.find(c->step);
  if (it != committed_.end() && it->second == c) {
    committed_.erase(it);  // Reported, never loaded.
    rejected_.push_back(std::string(c->verify_status.message()));
  }
  return c->verify_status;
}

absl::StatusOr<v1::CheckpointInfo> CheckpointStore::Get(absl::string_view job_id,
                                                        std::optional<int64_t> step) {
  ZS_RETURN_IF_ERROR(CheckReadJob(job_id));
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<Committed> c, FindCommitted(job_id, step));
  ZS_RETURN_IF_ERROR(EnsureVerified(c));
  absl::MutexLock clock(&c->mu);
  v1::CheckpointInfo info;
  *info.mutable_summary() = c->summary;
  info.set_model_config_json(c->loaded->manifest.model_config_json());
  *info.mutable_plan() = c->loaded->manifest.plan();
  *info.mutable_trainer() = c->loaded->manifest.trainer();
  return info;
}

absl::Status CheckpointStore::ReadRange(
    const v1::DownloadRangeRequest& req,
    const std::function<absl::Status(const v1::RangeChunk&)>& sink) {
  v1::RangeChunk chunk;
  std::string data;
  return ReadRange(req, RangeSink{[&](size_t bytes) {
                                    data.resize(bytes);
                                    return data.data();
                                  },
                                  [&](const v1::RangeChunk& header) {
                                    chunk = header;
                                    chunk.mutable_data()->swap(data);
                                    absl::Status st = sink(chunk);
                                    chunk.mutable_data()->swap(data);
                                    return st;
                                  }});
}

absl::Status CheckpointStore::ReadRange(const v1::DownloadRangeRequest& req,
                                        const RangeSink& sink) {
  if (!ValidTensorKind(req.kind())) return absl::InvalidArgumentError("kind is not valid");
  if (req.offset() < 0)
    return absl::InvalidArgumentError(absl::StrCat("offset ", req.offset(), " is negative"));
  if (req.length() < 1)
    return absl::InvalidArgumentError(absl::StrCat("length ", req.length(), " is < 1"));
  int64_t chunk_bytes = req.chunk_bytes() == 0 ? kDefaultChunkBytes : req.chunk_bytes();
  if (chunk_bytes < 4 || chunk_bytes > kMaxChunkBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk_bytes ", req.chunk_bytes(), " is not in [4, ", kMaxChunkBytes, "]"));
  }
  const int64_t chunk_elems = chunk_bytes / 4;
  if (req.model_weights()) return ReadModelWeights(req, chunk_elems, sink);
  std::optional<int64_t> step;
  if (req.has_step()) step = req.step();
  ZS_RETURN_IF_ERROR(CheckReadJob(req.job_id()));
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<Committed> c, FindCommitted(req.job_id(), step));
  ZS_RETURN_IF_ERROR(EnsureVerified(c));
  std::shared_ptr<const LoadedManifest> m;
  {
    absl::MutexLock clock(&c->mu);
    m = c->loaded;
  }
  const v1::CheckpointFile* file = nullptr;
  for (const v1::CheckpointFile& f : m->manifest.files()) {
    if (f.unit() == req.unit() && f.kind() == req.kind()) file = &f;
  }
  if (file == nullptr)
    return absl::InvalidArgumentError(absl::StrCat(
        "unit \"", req.unit(), "\" is not in checkpoint ", c->summary.checkpoint_id()));
  ZS_RETURN_IF_ERROR(CheckRange(req.offset(), req.length(), file->numel(),
                                absl::StrCat("unit ", req.unit(), "'s elements").c_str()));
  // Opened once: a retention delete during the read cannot pull it away.
  ZS_ASSIGN_OR_RETURN(const ReadOnlyFile in, ReadOnlyFile::Open(c->dir + "/" + file->path()));
  v1::RangeChunk chunk;
  chunk.set_step(c->step);
  const int64_t end_byte = (req.offset() + req.length()) * 4;
  int64_t advised = req.offset() * 4;  // Read-ahead asked for up to here.
  for (int64_t off = req.offset(); off < req.offset() + req.length(); off += chunk_elems) {
    const int64_t n = std::min(chunk_elems, req.offset() + req.length() - off);
    // Without direct reads, the disk reads the window ahead while this
    // chunk is hashed and sent (with them, the page cache is bypassed).
    const int64_t want = std::min(end_byte, off * 4 + kReadAheadBytes);
    if (!in.has_direct() && want > advised) {
      in.AdviseWillNeed(advised, want - advised);
      advised = want;
    }
    ZS_ASSIGN_OR_RETURN(
        const uint64_t hash,
        PReadWithXxh64(in, sink.buffer(static_cast<size_t>(n * 4)), n * 4, off * 4));
    chunk.set_offset(off);
    chunk.set_length(n);
    chunk.set_xxhash64(hash);
    ZS_RETURN_IF_ERROR(sink.send(chunk));
  }
  return absl::OkStatus();
}

}  // namespace zeroshard::server
