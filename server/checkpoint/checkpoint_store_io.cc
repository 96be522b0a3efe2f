// CheckpointStore: chunk writes and commit (reads: checkpoint_store_read.cc).
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/rpc/plan_proto.h"
#include "common/status_macros.h"
#include "server/checkpoint/checkpoint_files.h"
#include "server/checkpoint/checkpoint_store.h"
#include "server/checkpoint/checkpoint_store_internal.h"
#include "server/core/validation.h"

namespace zeroshard::server {
namespace fs = std::filesystem;

namespace {

// Field checks that need only the plan (no lock).
absl::Status ValidateChunk(const v1::ShardChunk& c, size_t data_size,
                           const CheckpointStore::Pending& p, int* unit) {
  if (c.rank() < 0 || c.rank() >= p.plan.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", c.rank(), " is not in [0, ", p.plan.world_size, ")"));
  }
  auto it = p.unit_index.find(c.unit());
  if (it == p.unit_index.end()) {
    return absl::InvalidArgumentError(absl::StrCat("unit \"", c.unit(), "\" is not in the plan"));
  }
  *unit = it->second;
  if (!ValidTensorKind(c.kind()))
    return absl::InvalidArgumentError(
        absl::StrCat("kind ", static_cast<int>(c.kind()), " is not valid"));
  if (c.dtype() != v1::DTYPE_FP32) return absl::InvalidArgumentError("dtype must be DTYPE_FP32");
  // [Note: overflow-safe ranges] Relative to the rank's shard, so no sum
  // of client values is ever formed.
  const ElementRange shard = p.plan.units[*unit].shard(c.rank());
  if (c.offset() < shard.offset) {
    return absl::InvalidArgumentError(absl::StrCat("offset ", c.offset(), " is before rank ",
                                                   c.rank(), "'s shard [", shard.offset, ", ",
                                                   shard.end(), ") of unit ", c.unit()));
  }
  ZS_RETURN_IF_ERROR(
      CheckRange(c.offset() - shard.offset, c.length(), shard.length,
                 absl::StrCat("chunk of rank ", c.rank(), " unit ", c.unit(),
                              ", relative to its shard [", shard.offset, ", ", shard.end(), ")")
                     .c_str()));
  // length <= shard.length here, so length * 4 cannot overflow.
  if (static_cast<int64_t>(data_size) != c.length() * 4) {
    return absl::InvalidArgumentError(absl::StrCat("data is ", data_size, " bytes; length ",
                                                   c.length(), " needs ", c.length() * 4));
  }
  return absl::OkStatus();
}

// OK while `p` takes chunks; else why not: the failure that ended it, or
// that it is done (committed).
absl::Status TakesChunks(const CheckpointStore::Pending& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p.mu) {
  if (!p.failed.ok()) return p.failed;
  if (p.done)
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", p.id, " is no longer pending"));
  return absl::OkStatus();
}

// Adds to out->missing_ranks every rank whose shards have not all arrived.
void AddMissingRanks(CheckpointStore::Pending& p, v1::CommitCheckpointResponse* out)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(p.mu) {
  for (int r = 0; r < p.plan.world_size; ++r) {
    bool complete = true;
    for (size_t u = 0; complete && u < p.plan.units.size(); ++u) {
      const ElementRange shard = p.plan.units[u].shard(r);
      for (v1::TensorKind k : kAllKinds) {
        if (!p.Covers(r, static_cast<int>(u), k, shard.offset, shard.end())) {
          complete = false;
        }
      }
    }
    if (!complete) out->add_missing_ranks(r);
  }
}

}  // namespace

absl::Status CheckpointStore::WriteChunk(const v1::ShardChunk& chunk) {
  const absl::string_view data = chunk.data();
  return WriteChunk(chunk, absl::MakeConstSpan(&data, 1));
}

absl::Status CheckpointStore::WriteChunk(const v1::ShardChunk& chunk,
                                         absl::Span<const absl::string_view> pieces) {
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<Pending> p, FindPending(chunk.checkpoint_id()));
  int unit = -1;
  size_t data_size = 0;
  for (absl::string_view piece : pieces) data_size += piece.size();
  ZS_RETURN_IF_ERROR(ValidateChunk(chunk, data_size, *p, &unit));
  {
    absl::MutexLock plock(&p->mu);
    ZS_RETURN_IF_ERROR(TakesChunks(*p));
    ++p->writes_in_flight;  // [Note: writes in flight]
  }
  // The file exists while p lives: it was created before the id went out and
  // is only removed once p is done (a write then fails or lands in an
  // unlinked file, and the coverage update below refuses it).
  const std::string path = p->DataPath(unit, chunk.kind());
  const int64_t bytes = chunk.length() * 4;
  absl::StatusOr<uint64_t> hash = WriteChunkData(path, pieces, chunk.offset() * 4, bytes);
  if (!hash.ok()) {
    // Free the space now; committed checkpoints are untouched.
    absl::Status why =
        absl::Status(hash.status().code(),
                     absl::StrCat("checkpoint ", p->id, " dropped: ", hash.status().message()));
    DropPending(p, why, FailureReasonOf(hash.status()));
    absl::MutexLock plock(&p->mu);
    --p->writes_in_flight;  // After the drop: a waiting Commit finds it failed.
    return why;
  }
  if (*hash != chunk.xxhash64()) return RefuseChunk(*p, chunk, *hash);
  absl::MutexLock plock(&p->mu);
  --p->writes_in_flight;
  ZS_RETURN_IF_ERROR(TakesChunks(*p));  // Dropped or committed meanwhile.
  p->AddCoverage(chunk.rank(), unit, chunk.kind(), chunk.offset(), chunk.offset() + chunk.length());
  p->bytes_received += bytes;
  return absl::OkStatus();
}

absl::Status CheckpointStore::RefuseChunk(Pending& p, const v1::ShardChunk& chunk, uint64_t hash) {
  absl::Status bad = absl::DataLossError(absl::StrFormat(
      "chunk of checkpoint %s rank %d unit %s kind %s offset %d: xxhash64 %016x, chunk says %016x",
      p.id, chunk.rank(), chunk.unit(), TensorKindName(chunk.kind()), chunk.offset(), hash,
      chunk.xxhash64()));
  bool first_failure = false;
  {
    absl::MutexLock plock(&p.mu);
    --p.writes_in_flight;  // With the failure, in one step: see [Note: writes in flight].
    first_failure = p.failed.ok() && !p.done;
    if (p.failed.ok()) p.failed = bad;  // This checkpoint can never commit.
  }
  if (first_failure) NoteFailed("checksum");
  return bad;
}

absl::StatusOr<uint64_t> CheckpointStore::WriteChunkData(const std::string& path,
                                                         absl::Span<const absl::string_view> pieces,
                                                         int64_t offset, int64_t bytes) {
  if (int injected = options_.write_fault ? options_.write_fault(bytes) : 0; injected != 0) {
    return ErrnoStatus(injected, "write", path);
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open", path);
  absl::StatusOr<uint64_t> hash = PWriteWithXxh64(fd, pieces, offset, path);
  // The disk writes this chunk while the next ones arrive; the commit's
  // fsync still makes it durable.
  absl::Status st = hash.ok() ? StartWriteback(fd, offset, bytes, path) : hash.status();
  ::close(fd);
  if (!st.ok()) return st;
  return hash;
}

absl::StatusOr<v1::CommitCheckpointResponse> CheckpointStore::Commit(
    const std::string& checkpoint_id, int rank, int64_t max_step) {
  absl::StatusOr<std::shared_ptr<Pending>> found = FindPending(checkpoint_id);
  if (!found.ok()) return CommittedBefore(checkpoint_id, found.status());
  std::shared_ptr<Pending> p = *std::move(found);
  if (rank < 0 || rank >= p->plan.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " is not in [0, ", p->plan.world_size, ")"));
  }
  v1::CommitCheckpointResponse out;
  out.set_step(p->step);
  absl::Status st;
  {
    absl::MutexLock plock(&p->mu);
    // [Note: writes in flight] A chunk is hashed as it is written, so its
    // bytes may be in the file before its hash is known to be bad (a chunk
    // sent again over a range already covered). The commit waits for every
    // write under way to be judged: a bad one has then set `failed`.
    p->mu.Await(absl::Condition(
        +[](Pending* q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->mu) { return q->writes_in_flight == 0; },
        p.get()));
    if (!p->failed.ok()) {
      return absl::Status(
          p->failed.code(),
          absl::StrCat("checkpoint ", p->id, " can never commit: ", p->failed.message()));
    }
    if (p->done) {  // Committed by a racing call between FindPending and here.
      out.set_committed(true);
      return out;
    }
    AddMissingRanks(*p, &out);
    if (out.missing_ranks_size() > 0) return out;
    if (p->step > max_step) {  // Stays pending: a later Commit may find the step trained.
      return absl::FailedPreconditionError(absl::StrCat(
          "CommitCheckpoint: step ", p->step, " is ahead of the job's step ", max_step,
          " (the lowest step every rank reported): a save commits only trained steps"));
    }
    st = CommitLocked(*p);
    if (st.ok()) p->done = true;
  }
  if (!st.ok()) {
    DropPending(p, st, FailureReasonOf(st));
    return st;
  }
  ZS_RETURN_IF_ERROR(Install(*p));
  out.set_committed(true);
  NoteCommitted(*p);
  return out;
}

absl::StatusOr<v1::CommitCheckpointResponse> CheckpointStore::CommittedBefore(
    const std::string& checkpoint_id, const absl::Status& not_pending) const {
  ZS_ASSIGN_OR_RETURN(int64_t step, StepFromPendingId(checkpoint_id));
  absl::MutexLock lock(&mu_);
  if (!committed_.count(step)) return not_pending;
  v1::CommitCheckpointResponse out;
  out.set_committed(true);  // An earlier Commit did it.
  out.set_step(step);
  return out;
}

absl::Status CheckpointStore::Install(const Pending& p) {
  const std::string final_dir = options_.dir + "/" + CheckpointIdForStep(p.step);
  // Just written; a failure here is the disk's. Hashes were computed from
  // the files just now, so it counts as verified.
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<Committed> c,
                      LoadCommitted(p.step, final_dir, /*verified=*/true));
  std::vector<std::shared_ptr<Pending>> older;
  std::vector<std::string> retired;
  {
    absl::MutexLock lock(&mu_);
    pending_.erase(p.id);
    committed_[p.step] = std::move(c);
    retired = ApplyRetention();
    for (const auto& [pid, other] : pending_) {
      if (other->step < p.step) older.push_back(other);
    }
  }
  Reap(std::move(retired));
  // Saves older than a committed one can only be abandoned ones.
  for (const auto& o : older) {
    DropPending(o, absl::AbortedError(absl::StrCat("superseded by ", p.id)), "abandoned");
  }
  return absl::OkStatus();
}

namespace {

// fsync + hash each of `paths`, 8 files at a time: concurrent fsyncs share
// the file system's journal commits and keep the device queue full while
// the hashing uses the cores (the data is mostly on disk already: each
// chunk started its writeback when it arrived).
absl::StatusOr<std::vector<FileHashes>> SyncAndHashFiles(const std::vector<std::string>& paths,
                                                         int64_t block_bytes) {
  const size_t n = paths.size();
  std::vector<FileHashes> hashes(n);
  std::vector<absl::Status> errors(n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      errors[i] = FsyncPath(paths[i]);
      if (!errors[i].ok()) continue;
      absl::StatusOr<FileHashes> h = HashFileBlocks(paths[i], block_bytes);
      if (h.ok())
        hashes[i] = *std::move(h);
      else
        errors[i] = h.status();
    }
  };
  std::vector<std::thread> workers;
  for (size_t t = 1; t < std::min<size_t>(8, n); ++t) workers.emplace_back(work);
  work();
  for (std::thread& t : workers) t.join();
  for (const absl::Status& e : errors) ZS_RETURN_IF_ERROR(e);
  return hashes;
}

}  // namespace

absl::Status CheckpointStore::CommitLocked(Pending& p) {
  v1::CheckpointManifest m;
  m.set_format_version(1);
  m.set_model_config_json(p.meta.model_config_json());
  *m.mutable_plan() = p.meta.plan();
  v1::TrainerState* t = m.mutable_trainer();
  t->set_optimizer_step(p.meta.optimizer_step());
  t->set_data_cursor(p.meta.data_cursor());
  for (const std::string& rng : p.rng_state) t->add_rng_state(rng);
  int64_t total = 0;
  const size_t n = p.plan.units.size() * kNumKinds;  // Unit-major, then kAllKinds.
  std::vector<std::string> paths;
  for (size_t i = 0; i < n; ++i) {
    paths.push_back(p.DataPath(static_cast<int>(i / kNumKinds), kAllKinds[i % kNumKinds]));
  }
  ZS_ASSIGN_OR_RETURN(const std::vector<FileHashes> hashes,
                      SyncAndHashFiles(paths, options_.block_bytes));
  for (size_t i = 0; i < n; ++i) {
    const int u = static_cast<int>(i / kNumKinds);
    v1::CheckpointFile* f = m.add_files();
    f->set_path(DataFileName(u, kAllKinds[i % kNumKinds]));
    f->set_unit(p.plan.units[u].name);
    f->set_kind(kAllKinds[i % kNumKinds]);
    f->set_numel(p.plan.units[u].padded_numel);
    f->set_bytes(p.plan.units[u].padded_numel * 4);
    f->set_xxhash64(hashes[i].whole);
    f->set_block_bytes(options_.block_bytes);
    for (uint64_t h : hashes[i].blocks) f->add_block_xxhash64(h);
    total += f->bytes();
  }
  ZS_RETURN_IF_ERROR(FsyncPath(p.dir));
  v1::CheckpointSummary* s = m.mutable_summary();
  s->set_checkpoint_id(CheckpointIdForStep(p.step));  // The committed form (checkpoint.proto).
  s->set_job_id(p.meta.job_id());
  s->set_step(p.step);
  s->set_world_size(p.plan.world_size);
  s->set_stage(p.meta.stage());
  s->set_bytes(total);
  s->set_created_unix_ms(options_.now_unix_ms());
  ZS_ASSIGN_OR_RETURN(std::string json, ManifestToJson(m));
  ZS_RETURN_IF_ERROR(WriteFileAtomic(p.dir + "/" + kManifestName, json));
  return Publish(p);
}

absl::Status CheckpointStore::Publish(Pending& p) {
  // The commit point (see the header): the complete directory, manifest
  // included, takes its final name in one rename.
  const std::string final_dir = options_.dir + "/" + CheckpointIdForStep(p.step);
  std::error_code ec;
  if (!fs::exists(final_dir, ec)) {
    if (::rename(p.dir.c_str(), final_dir.c_str()) != 0) return ErrnoStatus(errno, "rename", p.dir);
    return FsyncPath(options_.dir);
  }
  // Replacing a committed step (a resumed run saving it again): swap the two
  // directories atomically, then delete the old one under the pending name.
  if (::renameat2(AT_FDCWD, p.dir.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) != 0) {
    if (errno != EINVAL && errno != ENOSYS) return ErrnoStatus(errno, "exchange", p.dir);
    // No RENAME_EXCHANGE on this file system: two renames; Scan repairs a
    // crash between them from the .replaced- directory.
    const std::string replaced = options_.dir + "/" + kReplacedPrefix + p.id;
    if (::rename(final_dir.c_str(), replaced.c_str()) != 0)
      return ErrnoStatus(errno, "rename", final_dir);
    if (::rename(p.dir.c_str(), final_dir.c_str()) != 0) return ErrnoStatus(errno, "rename", p.dir);
    ZS_RETURN_IF_ERROR(FsyncPath(options_.dir));
    fs::remove_all(replaced, ec);
    return absl::OkStatus();
  }
  ZS_RETURN_IF_ERROR(FsyncPath(options_.dir));
  fs::remove_all(p.dir, ec);  // Now the old checkpoint.
  return absl::OkStatus();
}

}  // namespace zeroshard::server
