// CheckpointStore: reads of committed checkpoints (lookup, first-read hash
// verification, ranged reads with read-ahead).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/formats/xxhash_copy.h"
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

// Asks the kernel to read up to kReadAheadBytes ahead of each read of a
// range (without direct reads; with them the page cache is bypassed), so
// the disk works while the chunk before is hashed and sent.
class ReadAhead {
 public:
  ReadAhead(const ReadOnlyFile& in, int64_t end_byte) : in_(in), end_byte_(end_byte) {}
  void Before(int64_t byte) {
    if (advised_ < 0) advised_ = byte;
    const int64_t want = std::min(end_byte_, byte + kReadAheadBytes);
    if (!in_.has_direct() && want > advised_) {
      in_.AdviseWillNeed(advised_, want - advised_);
      advised_ = want;
    }
  }

 private:
  const ReadOnlyFile& in_;
  const int64_t end_byte_;
  int64_t advised_ = -1;  // Read-ahead asked for up to here.
};

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
  const ElementRange range{req.offset(), req.length()};
  if (file->block_bytes() > 0) return ReadVerifiedBlocks(c, *file, in, range, chunk_elems, sink);
  v1::RangeChunk chunk;
  chunk.set_step(c->step);
  ReadAhead ahead(in, range.end() * 4);
  for (int64_t off = range.offset; off < range.end(); off += chunk_elems) {
    const int64_t n = std::min(chunk_elems, range.end() - off);
    ahead.Before(off * 4);
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

absl::Status CheckpointStore::ReadVerifiedBlocks(const std::shared_ptr<Committed>& c,
                                                 const v1::CheckpointFile& file,
                                                 const ReadOnlyFile& in, ElementRange range,
                                                 int64_t chunk_elems, const RangeSink& sink) {
  const int64_t block_elems = file.block_bytes() / 4;
  std::vector<char> whole_block;  // For chunks that cover part of a block.
  v1::RangeChunk chunk;
  chunk.set_step(c->step);
  ReadAhead ahead(in, range.end() * 4);
  auto send = [&](int64_t offset, int64_t length, uint64_t hash) {
    chunk.set_offset(offset);
    chunk.set_length(length);
    chunk.set_xxhash64(hash);
    return sink.send(chunk);
  };
  for (int64_t b = range.offset / block_elems; b * block_elems < range.end(); ++b) {
    const ElementRange block{b * block_elems,
                             std::min(block_elems, file.numel() - b * block_elems)};
    const int64_t first = std::max(range.offset, block.offset);
    const int64_t last = std::min(range.end(), block.end());
    ahead.Before(block.offset * 4);
    if (first == block.offset && last == block.end() && block.length <= chunk_elems) {
      // The chunk is the block: one hash verifies the disk's bytes and
      // travels with them.
      const int64_t bytes = block.length * 4;
      ZS_ASSIGN_OR_RETURN(
          const uint64_t hash,
          PReadWithXxh64(in, sink.buffer(static_cast<size_t>(bytes)), bytes, block.offset * 4));
      ZS_RETURN_IF_ERROR(CheckBlock(c, file, b, hash));
      ZS_RETURN_IF_ERROR(send(block.offset, block.length, hash));
      continue;
    }
    // The range covers part of the block, or chunks are smaller than a
    // block: the block is read whole to be verified, then sent from memory.
    whole_block.resize(static_cast<size_t>(block.length * 4));
    ZS_ASSIGN_OR_RETURN(const uint64_t hash,
                        PReadWithXxh64(in, whole_block.data(), block.length * 4, block.offset * 4));
    ZS_RETURN_IF_ERROR(CheckBlock(c, file, b, hash));
    for (int64_t off = first; off < last; off += chunk_elems) {
      const int64_t n = std::min(chunk_elems, last - off);
      const size_t bytes = static_cast<size_t>(n * 4);
      ZS_RETURN_IF_ERROR(send(
          off, n,
          CopyWithXxh64(sink.buffer(bytes), whole_block.data() + (off - block.offset) * 4, bytes)));
    }
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
