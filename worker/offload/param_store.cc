// ParamStore (param_store.h): per-unit files of stage-3 compute shards,
// streamed through prefetch + 1 host staging slots by a read and a write
// thread.
#include "worker/offload/param_store.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/memory_model.h"
#include "common/status_macros.h"

namespace zeroshard {

absl::StatusOr<std::unique_ptr<ParamStore>> ParamStore::Create(const ParamStoreOptions& options,
                                                               std::vector<int64_t> bytes,
                                                               MemoryAccountant* accountant) {
  if (options.dir.empty() || ::access(options.dir.c_str(), W_OK | X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("offload dir '", options.dir, "' is not an existing writable directory"));
  }
  if (options.prefetch < 0 || options.prefetch > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("offload prefetch: ", options.prefetch, " (expected 0..64)"));
  }
  std::unique_ptr<ParamStore> store(new ParamStore(options, std::move(bytes), accountant));
  ZS_RETURN_IF_ERROR(store->Init());
  return store;
}

ParamStore::ParamStore(const ParamStoreOptions& options, std::vector<int64_t> bytes,
                       MemoryAccountant* accountant)
    : options_(options),
      bytes_(std::move(bytes)),
      accountant_(accountant),
      reads_(options.force_pread),
      writes_(options.force_pread) {}

ParamStore::~ParamStore() {
  for (Slot& s : slots_) {
    (void)reads_.Wait(s.read, options_.timeout);
    (void)writes_.Wait(s.write, options_.timeout);
  }
  accountant_->Freed(MemoryKind::kParams, StagingBytes());
  for (int u = 0; u < static_cast<int>(files_.size()); ++u) {
    if (files_[u] != nullptr) accountant_->Freed(MemoryKind::kOffloaded, AlignUp(bytes_[u]));
  }
}

absl::Status ParamStore::Init() {
  const int64_t max_bytes = bytes_.empty() ? 0 : *std::max_element(bytes_.begin(), bytes_.end());
  slot_bytes_ = AlignUp(max_bytes);
  slots_.resize(options_.prefetch + 1);
  ZS_RETURN_IF_ERROR(AllocateSlots(slots_, slot_bytes_));
  // One formula with the memory model, which the accounting must equal.
  ZS_CHECK(StagingBytes() == ParamStagingBytes(options_.prefetch, max_bytes));
  accountant_->Allocated(MemoryKind::kParams, StagingBytes());
  files_.resize(bytes_.size());
  for (int u = 0; u < num_units(); ++u) {
    const std::string path =
        absl::StrCat(options_.dir, "/", options_.file_prefix, "u", u, ".param");
    ZS_ASSIGN_OR_RETURN(files_[u], BlockFile::Create(path));
    accountant_->Allocated(MemoryKind::kOffloaded, AlignUp(bytes_[u]));
  }
  return absl::OkStatus();
}

absl::Status ParamStore::CheckUnit(int u) const {
  if (u < 0 || u >= num_units()) {
    return absl::InvalidArgumentError(
        absl::StrCat("param store: unit ", u, " out of range [0, ", num_units(), ")"));
  }
  return absl::OkStatus();
}

ParamStore::Slot* ParamStore::Holding(int u) { return SlotHolding(slots_, u); }

absl::Status ParamStore::Settle(Slot& s) {
  return SettleSlot(reads_, writes_, s, options_.timeout);
}

absl::StatusOr<ParamStore::Slot*> ParamStore::FreeSlot(absl::Span<const int> keep) {
  Slot* best = nullptr;
  for (Slot& s : slots_) {
    if (s.unit == -1) {
      best = &s;
      break;
    }
    if (std::find(keep.begin(), keep.end(), s.unit) != keep.end()) continue;
    if (best == nullptr || s.used < best->used) best = &s;
  }
  if (best == nullptr) return nullptr;
  ZS_RETURN_IF_ERROR(Settle(*best));
  best->unit = -1;
  return best;
}

absl::Status ParamStore::Prefetch(absl::Span<const int> units) {
  const absl::Span<const int> ahead =
      units.subspan(0, std::min<size_t>(units.size(), options_.prefetch));
  for (int u : ahead) {
    ZS_RETURN_IF_ERROR(CheckUnit(u));
    if (Holding(u) != nullptr) continue;
    ZS_ASSIGN_OR_RETURN(Slot * s, FreeSlot(ahead));
    if (s == nullptr) return absl::OkStatus();  // Every slot holds an upcoming unit.
    s->unit = u;
    Touch(*s);
    s->read = reads_.Submit(false, files_[u].get(), s->mem.get(), AlignUp(bytes_[u]), 0);
  }
  return absl::OkStatus();
}

absl::StatusOr<const void*> ParamStore::Acquire(int u) {
  ZS_RETURN_IF_ERROR(CheckUnit(u));
  Slot* s = Holding(u);
  if (s == nullptr) {
    ZS_ASSIGN_OR_RETURN(s, FreeSlot({}));
    ZS_CHECK(s != nullptr);  // With nothing kept, some slot is free.
    s->unit = u;
    s->read = reads_.Submit(false, files_[u].get(), s->mem.get(), AlignUp(bytes_[u]), 0);
  }
  Touch(*s);
  // A write-back still in flight only reads the slot: the bytes are valid.
  ZS_RETURN_IF_ERROR(reads_.Wait(s->read, options_.timeout));
  s->read = 0;
  return s->mem.get();
}

absl::StatusOr<void*> ParamStore::BeginWrite(int u) {
  ZS_RETURN_IF_ERROR(CheckUnit(u));
  Slot* s = Holding(u);
  if (s != nullptr) {
    ZS_RETURN_IF_ERROR(Settle(*s));  // Not rewritten while a transfer uses it.
  } else {
    ZS_ASSIGN_OR_RETURN(s, FreeSlot({}));
    ZS_CHECK(s != nullptr);
    s->unit = u;
  }
  Touch(*s);
  // The alignment tail goes to the file too: keep it zero.
  std::memset(s->mem.get() + bytes_[u], 0, AlignUp(bytes_[u]) - bytes_[u]);
  return s->mem.get();
}

absl::Status ParamStore::Commit(int u) {
  ZS_RETURN_IF_ERROR(CheckUnit(u));
  Slot* s = Holding(u);
  ZS_CHECK(s != nullptr && s->read == 0 && s->write == 0);  // BeginWrite(u) came first.
  s->write = writes_.Submit(true, files_[u].get(), s->mem.get(), AlignUp(bytes_[u]), 0);
  return absl::OkStatus();
}

absl::Status ParamStore::Flush() { return WaitWriteBacks(writes_, slots_, options_.timeout); }

}  // namespace zeroshard
