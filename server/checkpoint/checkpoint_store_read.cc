// CheckpointStore: reads of committed checkpoints (lookup, first-read hash
// verification, ranged reads, files opened for local reads).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/formats/hashed_read.h"
#include "common/status_macros.h"
#include "server/checkpoint/checkpoint_files.h"
#include "server/checkpoint/checkpoint_store.h"
#include "server/checkpoint/checkpoint_store_internal.h"
#include "server/core/validation.h"

namespace zeroshard::server {
namespace {

constexpr int64_t kDefaultChunkBytes = 1 << 20;
constexpr int64_t kMaxChunkBytes = (4 << 20) - (64 << 10);
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
      // Files with block hashes are verified block by block as they are
      // read (ReadVerifiedBlocks); older ones here, whole.
      absl::StatusOr<LoadedManifest> m = LoadManifest(c->dir, HashCheck::kDeferBlocks);
      c->verified = true;
      if (m.ok()) {
        c->loaded = std::make_shared<const LoadedManifest>(*std::move(m));
      } else {
        c->verify_status = m.status();
      }
    }
    if (c->verify_status.ok()) return absl::OkStatus();
  }
  return Reject(c, c->verify_status);
}

absl::Status CheckpointStore::Reject(const std::shared_ptr<Committed>& c, const absl::Status& why) {
  absl::MutexLock lock(&mu_);
  auto it = committed_.find(c->step);
  if (it != committed_.end() && it->second == c) {
    committed_.erase(it);  // Reported, never loaded again.
    rejected_.push_back(std::string(why.message()));
  }
  return why;
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

absl::StatusOr<CheckpointStore::FileOfRead> CheckpointStore::FindFile(
    const v1::DownloadRangeRequest& req) {
  std::optional<int64_t> step;
  if (req.has_step()) step = req.step();
  ZS_RETURN_IF_ERROR(CheckReadJob(req.job_id()));
  FileOfRead found;
  ZS_ASSIGN_OR_RETURN(found.checkpoint, FindCommitted(req.job_id(), step));
  ZS_RETURN_IF_ERROR(EnsureVerified(found.checkpoint));
  {
    absl::MutexLock clock(&found.checkpoint->mu);
    found.manifest = found.checkpoint->loaded;
  }
  for (const v1::CheckpointFile& f : found.manifest->manifest.files()) {
    if (f.unit() == req.unit() && f.kind() == req.kind()) found.file = &f;
  }
  if (found.file == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unit \"", req.unit(),
                                                   "\" is not in checkpoint ",
                                                   found.checkpoint->summary.checkpoint_id()));
  }
  return found;
}

absl::StatusOr<CheckpointStore::OpenedFile> CheckpointStore::OpenForLocalRead(
    const v1::DownloadRangeRequest& req) {
  if (!ValidTensorKind(req.kind())) return absl::InvalidArgumentError("kind is not valid");
  if (req.model_weights()) {
    return absl::FailedPreconditionError("local reads serve checkpoints, not model weights");
  }
  ZS_ASSIGN_OR_RETURN(const FileOfRead found, FindFile(req));
  if (found.file->block_bytes() <= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("file ", found.file->path(), " has no block hashes (written before them)"));
  }
  ZS_ASSIGN_OR_RETURN(ReadOnlyFile in,
                      ReadOnlyFile::Open(found.checkpoint->dir + "/" + found.file->path()));
  return OpenedFile{found.checkpoint->step, *found.file, std::move(in)};
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
  ZS_ASSIGN_OR_RETURN(const FileOfRead found, FindFile(req));
  const std::shared_ptr<Committed>& c = found.checkpoint;
  const v1::CheckpointFile* file = found.file;
  ZS_RETURN_IF_ERROR(CheckRange(req.offset(), req.length(), file->numel(),
                                absl::StrCat("unit ", req.unit(), "'s elements").c_str()));
  // Opened once: a retention delete during the read cannot pull it away.
  ZS_ASSIGN_OR_RETURN(const ReadOnlyFile in, ReadOnlyFile::Open(c->dir + "/" + file->path()));
  const ElementRange range{req.offset(), req.length()};
  if (file->block_bytes() > 0) {
    return ReadVerifiedBlocks(
        *file, in, range, chunk_elems, c->step, sink,
        [&](int64_t block, uint64_t hash) { return CheckBlock(c, *file, block, hash); });
  }
  v1::RangeChunk chunk;
  chunk.set_step(c->step);
  for (int64_t off = range.offset; off < range.end(); off += chunk_elems) {
    const int64_t n = std::min(chunk_elems, range.end() - off);
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

absl::Status CheckpointStore::CheckBlock(const std::shared_ptr<Committed>& c,
                                         const v1::CheckpointFile& file, int64_t block,
                                         uint64_t hash) {
  if (block >= file.block_xxhash64_size()) {  // LoadManifest checked the shape; kept safe.
    return absl::DataLossError(absl::StrCat("checkpoint ", c->dir, ": file ", file.path(),
                                            " has no hash for block ", block));
  }
  if (hash == file.block_xxhash64(static_cast<int>(block))) return absl::OkStatus();
  return Reject(c, absl::DataLossError(absl::StrFormat(
                       "checkpoint %s: file %s block %d (bytes from %d) has xxhash64 %016x, "
                       "manifest says %016x: the file changed on disk after its commit",
                       c->dir, file.path(), block, block * file.block_bytes(), hash,
                       file.block_xxhash64(static_cast<int>(block)))));
}

}  // namespace zeroshard::server
