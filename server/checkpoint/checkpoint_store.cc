#include "server/checkpoint/checkpoint_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/rpc/plan_proto.h"
#include "common/status_macros.h"
#include "server/checkpoint/checkpoint_files.h"
#include "server/checkpoint/checkpoint_store_internal.h"
#include "server/core/validation.h"

namespace zeroshard::server {
namespace fs = std::filesystem;

namespace {

constexpr int64_t kMaxConfigBytes = 1 << 20;
constexpr int64_t kMaxRngBytes = 64 << 10;
constexpr size_t kMaxUnits = 100000;
constexpr size_t kMaxPending = 8;

// A random suffix, so a stale uploader's chunks never land in a newer
// pending checkpoint that happens to share step and attempt.
uint32_t NextNonce() {
  static std::mt19937 gen{std::random_device{}()};
  static absl::Mutex mu(absl::kConstInit);
  absl::MutexLock lock(&mu);
  return static_cast<uint32_t>(gen());
}

absl::Status ValidateBegin(const v1::BeginCheckpointRequest& req) {
  if (req.job_id().empty() || req.job_id().size() > 128) {
    return absl::InvalidArgumentError("job_id must be 1..128 characters");
  }
  ZS_RETURN_IF_ERROR(CheckStep(req.step(), /*job_steps=*/0, "step"));
  if (req.world_size() < 1 || req.world_size() != req.plan().world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("world_size ", req.world_size(),
                                                   " must be >= 1 and equal plan.world_size ",
                                                   req.plan().world_size()));
  }
  if (req.rank() < 0 || req.rank() >= req.world_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", req.rank(), " is not in [0, world_size)"));
  }
  if (req.stage() < 0 || req.stage() > 3) {
    return absl::InvalidArgumentError(absl::StrCat("stage ", req.stage(), " is not in 0..3"));
  }
  if (static_cast<int64_t>(req.model_config_json().size()) > kMaxConfigBytes) {
    return absl::InvalidArgumentError("model_config_json is larger than 1 MiB");
  }
  if (static_cast<int64_t>(req.rng_state().size()) > kMaxRngBytes) {
    return absl::InvalidArgumentError("rng_state is larger than 64 KiB");
  }
  if (req.plan().units_size() == 0 || static_cast<size_t>(req.plan().units_size()) > kMaxUnits) {
    return absl::InvalidArgumentError("plan.units must hold 1..100000 units");
  }
  if (req.optimizer_step() < 0 || req.data_cursor() < 0) {
    return absl::InvalidArgumentError("optimizer_step and data_cursor must be >= 0");
  }
  return absl::OkStatus();
}

int64_t DefaultNowMs() { return absl::ToUnixMillis(absl::Now()); }

// A Begin that joins a pending checkpoint must describe the same one: every
// field but the caller's own (rank, rng_state) and model_config_json.
absl::Status CheckSameCheckpoint(const v1::BeginCheckpointRequest& req,
                                 const CheckpointStore::Pending& p) {
  v1::BeginCheckpointRequest mine = req;
  mine.clear_rank();
  mine.clear_rng_state();
  mine.clear_model_config_json();
  v1::BeginCheckpointRequest theirs = p.meta;
  theirs.clear_model_config_json();
  if (mine.SerializeAsString() == theirs.SerializeAsString()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("Begin for ", p.id,
                   " disagrees with the pending checkpoint on job_id, world_size, "
                   "stage, plan, optimizer_step or data_cursor"));
}

// Bounds abandoned saves: adds to `stale` the oldest steps beyond
// kMaxPending, counting the one about to be created.
void AddOldestBeyondLimit(
    const std::map<std::string, std::shared_ptr<CheckpointStore::Pending>>& pending,
    std::vector<std::shared_ptr<CheckpointStore::Pending>>* stale) {
  std::vector<std::shared_ptr<CheckpointStore::Pending>> all;
  for (const auto& [pid, other] : pending) {
    if (std::find(stale->begin(), stale->end(), other) == stale->end()) all.push_back(other);
  }
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a->step < b->step; });
  for (size_t i = 0; i + kMaxPending <= all.size(); ++i) stale->push_back(all[i]);
}

// Fills a new pending checkpoint for `req` under `store_dir`, with a fresh id.
void InitPending(const v1::BeginCheckpointRequest& req, ShardPlan plan,
                 const std::string& store_dir, CheckpointStore::Pending& p)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(p.mu) {
  p.id = absl::StrFormat("%s.%d.%08x", CheckpointIdForStep(req.step()), req.attempt(), NextNonce());
  p.dir = (fs::path(store_dir) / (kPendingPrefix + p.id)).string();
  p.step = req.step();
  p.attempt = req.attempt();
  p.meta = req;
  p.meta.clear_rank();
  p.meta.clear_rng_state();
  p.plan = std::move(plan);
  for (size_t u = 0; u < p.plan.units.size(); ++u) {
    p.unit_index[p.plan.units[u].name] = static_cast<int>(u);
  }
  p.rng_state.resize(req.world_size());
}

}  // namespace

CheckpointStore::CheckpointStore(CheckpointStoreOptions options) : options_(std::move(options)) {}
CheckpointStore::~CheckpointStore() = default;

absl::StatusOr<std::unique_ptr<CheckpointStore>> CheckpointStore::Open(
    CheckpointStoreOptions options) {
  if (options.dir.empty()) return absl::InvalidArgumentError("checkpoint dir is empty");
  if (options.keep_last < 0) return absl::InvalidArgumentError("keep_last must be >= 0");
  if (options.block_bytes <= 0 || options.block_bytes > kMaxCheckpointBlockBytes ||
      options.block_bytes % 4 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("block_bytes must be a multiple of 4 in [4, ",
                                                   kMaxCheckpointBlockBytes, "], got ",
                                                   options.block_bytes));
  }
  if (!options.now_unix_ms) options.now_unix_ms = DefaultNowMs;
  std::error_code ec;
  fs::create_directories(options.dir, ec);
  if (ec)
    return absl::InternalError(
        absl::StrCat("create checkpoint dir ", options.dir, ": ", ec.message()));
  std::unique_ptr<CheckpointStore> store(new CheckpointStore(std::move(options)));
  ZS_RETURN_IF_ERROR(store->Scan());
  return store;
}

absl::Status CheckpointStore::Scan() {
  std::error_code ec;
  absl::MutexLock lock(&mu_);
  std::vector<fs::path> replaced;
  for (const fs::directory_entry& e : fs::directory_iterator(options_.dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kPendingPrefix, 0) == 0) {
      fs::remove_all(e.path(), ec);  // Never committed (or a replaced one's leftovers).
      continue;
    }
    if (name.rfind(kReplacedPrefix, 0) == 0) {
      replaced.push_back(e.path());
      continue;
    }
    if (!StepFromCheckpointId(name).ok() || !e.is_directory()) continue;
    if (!fs::exists(e.path() / kManifestName)) fs::remove_all(e.path(), ec);  // Partial.
  }
  // A crash between the two renames of a non-atomic replacement: put the
  // old checkpoint back unless the new one made it.
  for (const fs::path& r : replaced) {
    absl::StatusOr<int64_t> step =
        StepFromPendingId(r.filename().string().substr(strlen(kReplacedPrefix)));
    const fs::path final_dir = fs::path(options_.dir) / CheckpointIdForStep(step.ok() ? *step : 0);
    if (step.ok() && !fs::exists(final_dir / kManifestName)) {
      fs::remove_all(final_dir, ec);
      fs::rename(r, final_dir, ec);
    } else {
      fs::remove_all(r, ec);
    }
  }
  for (const fs::directory_entry& e : fs::directory_iterator(options_.dir, ec)) {
    absl::StatusOr<int64_t> step = StepFromCheckpointId(e.path().filename().string());
    if (!step.ok() || !e.is_directory()) continue;
    absl::StatusOr<std::shared_ptr<Committed>> c =
        LoadCommitted(*step, e.path().string(), /*verified=*/false);
    if (!c.ok()) {
      rejected_.push_back(std::string(c.status().message()));
      continue;
    }
    committed_[*step] = *std::move(c);
  }
  if (ec) return absl::InternalError(absl::StrCat("scan ", options_.dir, ": ", ec.message()));
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<CheckpointStore::Committed>> LoadCommitted(int64_t step,
                                                                          const std::string& dir,
                                                                          bool verified) {
  ZS_ASSIGN_OR_RETURN(LoadedManifest m, LoadManifest(dir, HashCheck::kNone));
  auto c = std::make_shared<CheckpointStore::Committed>();
  c->step = step;
  c->dir = dir;
  c->summary = m.manifest.summary();
  c->summary.set_checkpoint_id(
      CheckpointIdForStep(step));  // Older manifests hold the pending form.
  absl::MutexLock clock(&c->mu);
  c->verified = verified;
  c->loaded = std::make_shared<const LoadedManifest>(std::move(m));
  return c;
}

absl::StatusOr<std::string> CheckpointStore::Begin(const v1::BeginCheckpointRequest& req) {
  // The job first: a request for another job is refused as that
  // (FAILED_PRECONDITION naming both ids), whatever else is wrong with it.
  ZS_RETURN_IF_ERROR(CheckBeginAgainstJob(req));
  ZS_RETURN_IF_ERROR(ValidateBegin(req));
  absl::StatusOr<ShardPlan> plan = ShardPlanFromProto(req.plan());
  if (!plan.ok())
    return absl::InvalidArgumentError(absl::StrCat("plan: ", plan.status().message()));
  ZS_ASSIGN_OR_RETURN(Placement placed, JoinOrCreate(req, *std::move(plan)));
  const std::shared_ptr<Pending>& p = placed.pending;
  for (const auto& s : placed.stale) {
    DropPending(s, absl::AbortedError(absl::StrCat("replaced by ", p->id)), "abandoned");
  }
  absl::MutexLock plock(&p->mu);  // [Note: files before the id]
  if (p->done) {
    return absl::AbortedError(
        absl::StrCat("checkpoint ", p->id, " was dropped: ", p->failed.message()));
  }
  p->rng_state[req.rank()] = req.rng_state();
  return p->id;
}

// [Note: files before the id] A new pending checkpoint's mu is held from
// before it is published in pending_ until its files exist, and Begin takes
// it before handing out the id, so no rank gets the id of a checkpoint whose
// files are not there yet. Lock order: a Pending's mu, then mu_ (nothing
// takes a Pending's mu while holding mu_).
absl::StatusOr<CheckpointStore::Placement> CheckpointStore::JoinOrCreate(
    const v1::BeginCheckpointRequest& req, ShardPlan plan) {
  auto fresh = std::make_shared<Pending>();
  absl::Status files;
  {
    absl::MutexLock flock(&fresh->mu);  // Uncontended: nobody else sees `fresh` yet.
    absl::StatusOr<Placement> placed = Place(req, std::move(plan), fresh);
    if (!placed.ok() || !placed->created) return placed;
    files = CreateFilesLocked(*fresh);
    if (files.ok()) return placed;
  }
  DropPending(fresh, files, FailureReasonOf(files));
  return files;
}

absl::StatusOr<CheckpointStore::Placement> CheckpointStore::Place(
    const v1::BeginCheckpointRequest& req, ShardPlan plan, const std::shared_ptr<Pending>& fresh) {
  absl::MutexLock lock(&mu_);
  Placement placed;
  for (const auto& [pid, other] : pending_) {
    if (other->step != req.step()) continue;
    if (other->attempt > req.attempt()) {
      return absl::FailedPreconditionError(
          absl::StrCat("attempt ", req.attempt(), " is older than pending checkpoint ", pid));
    }
    if (other->attempt == req.attempt()) {
      placed.pending = other;
    } else {
      placed.stale.push_back(other);  // A restarted save replaces a cut-off one.
    }
  }
  if (placed.pending != nullptr) {
    ZS_RETURN_IF_ERROR(CheckSameCheckpoint(req, *placed.pending));
    return placed;
  }
  AddOldestBeyondLimit(pending_, &placed.stale);
  InitPending(req, std::move(plan), options_.dir, *fresh);
  fresh->begun_unix_ms = options_.now_unix_ms();
  pending_[fresh->id] = fresh;
  placed.pending = fresh;
  placed.created = true;
  return placed;
}

absl::Status CheckpointStore::CreateFilesLocked(Pending& p) {
  std::error_code ec;
  fs::remove_all(p.dir, ec);
  fs::create_directories(p.dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("create ", p.dir, ": ", ec.message()));
  for (size_t u = 0; u < p.plan.units.size(); ++u) {
    for (v1::TensorKind k : kAllKinds) {
      const std::string path = p.DataPath(static_cast<int>(u), k);
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd < 0) return ErrnoStatus(errno, "create", path);
      // Sparse until written; unwritten ranges read as zero (padding).
      absl::Status st = ::ftruncate(fd, p.plan.units[u].padded_numel * 4) == 0
                            ? absl::OkStatus()
                            : ErrnoStatus(errno, "size", path);
      ::close(fd);
      ZS_RETURN_IF_ERROR(st);
    }
  }
  return absl::OkStatus();
}

void CheckpointStore::DropPending(const std::shared_ptr<Pending>& p, const absl::Status& why,
                                  const char* reason) {
  bool first_failure = false;
  {
    absl::MutexLock plock(&p->mu);
    if (p->done) return;
    p->done = true;
    first_failure = p->failed.ok();  // A checksum failure was told already.
    if (first_failure) p->failed = why;
    std::error_code ec;
    fs::remove_all(p->dir, ec);
  }
  if (first_failure) NoteFailed(reason);
  absl::MutexLock lock(&mu_);
  auto it = pending_.find(p->id);
  if (it != pending_.end() && it->second == p) pending_.erase(it);
}

absl::StatusOr<std::shared_ptr<CheckpointStore::Pending>> CheckpointStore::FindPending(
    const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = pending_.find(id);
  if (it == pending_.end()) {
    return absl::NotFoundError(
        absl::StrCat("checkpoint_id \"", id, "\" is not a pending checkpoint"));
  }
  return it->second;
}

absl::Status CheckpointStore::Abort(const std::string& checkpoint_id) {
  ZS_ASSIGN_OR_RETURN(std::shared_ptr<Pending> p, FindPending(checkpoint_id));
  DropPending(p, absl::AbortedError(absl::StrCat("checkpoint ", checkpoint_id, " was aborted")),
              "aborted");
  return absl::OkStatus();
}

void CheckpointStore::NoteFailed(const char* reason) const {
  if (CheckpointObserver* o = observer_.load(); o != nullptr) o->Failed(reason);
}

void CheckpointStore::NoteCommitted(const Pending& p) const {
  CheckpointObserver* o = observer_.load();
  if (o == nullptr) return;
  int64_t bytes = 0;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = committed_.find(p.step); it != committed_.end()) {
      bytes = it->second->summary.bytes();
    }
  }
  o->Committed(p.step, bytes, static_cast<double>(options_.now_unix_ms() - p.begun_unix_ms) / 1e3);
}

int CheckpointStore::PendingCount() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(pending_.size());
}

v1::ListCheckpointsResponse CheckpointStore::List(absl::string_view job_id) const {
  v1::ListCheckpointsResponse out;
  absl::MutexLock lock(&mu_);
  for (const auto& [step, c] : committed_) {
    if (!job_id.empty() && c->summary.job_id() != job_id) continue;
    *out.add_checkpoints() = c->summary;
  }
  for (const std::string& r : rejected_) out.add_rejected(r);
  return out;
}

}  // namespace zeroshard::server
