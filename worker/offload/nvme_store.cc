// kNvme: one file per unit shard (master | m | v, each AlignUp(4n) bytes)
// under the offload dir, streamed through kStagingSlots aligned host slots
// by a read thread and a write thread (optimizer_store.h "How streaming
// works"). Files are unlinked as soon as they are open and never fsynced.
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/offload/block_file.h"
#include "worker/offload/host_update.h"
#include "worker/offload/io_queue.h"
#include "worker/offload/staging_slot.h"
#include "worker/offload/stores.h"

namespace zeroshard::offload_internal {
namespace {

class NvmeStore final : public OptimizerStore {
 public:
  NvmeStore(const OptimizerStoreOptions& o, std::vector<int64_t> sizes, Device* device,
            MemoryAccountant* accountant)
      : OptimizerStore(std::move(sizes)),
        options_(o),
        accountant_(accountant),
        update_(device, accountant, MaxSize(this->sizes()), o.cpu_threads, o.timeout),
        reads_(o.force_pread),
        writes_(o.force_pread) {}

  ~NvmeStore() override {
    (void)Flush();
    for (Slot& s : slots_) (void)reads_.Wait(s.read, options_.timeout);
    accountant_->Freed(MemoryKind::kOptimizer, slot_bytes_ * slots_.size());
    for (int u = 0; u < static_cast<int>(files_.size()); ++u) {
      if (files_[u] != nullptr) accountant_->Freed(MemoryKind::kOffloaded, FileBytes(u));
    }
  }

  absl::Status Init();
  OffloadTarget target() const override { return OffloadTarget::kNvme; }
  absl::Status Load(int u, const float* master, const float* m, const float* v) override;
  absl::Status Read(int u, int64_t offset, int64_t length, float* master, float* m,
                    float* v) override;
  absl::Status Update(int u, int next, const AdamWHyperparams& hp, int64_t step, float grad_scale,
                      const float* grad, void* out, DType dtype) override;
  absl::Status Flush() override;
  int64_t StagingBytes() const override {
    return StagingBytesFor(options_, sizes(), DeviceKind::kCpu);
  }

 private:
  using Slot = StagingSlot;  // Reads on reads_, write-backs on writes_.
  int64_t Segment(int u) const { return AlignUp(size(u) * 4); }
  int64_t FileBytes(int u) const { return 3 * Segment(u); }
  UnitState View(Slot& s) {
    const int64_t seg = Segment(s.unit) / 4;
    float* base = reinterpret_cast<float*>(s.mem.get());
    return {base, base + seg, base + 2 * seg, size(s.unit)};
  }
  // Waits until the slot's transfers are done.
  absl::Status Settle(Slot& s) { return SettleSlot(reads_, writes_, s, options_.timeout); }
  Slot* Holding(int u) { return SlotHolding(slots_, u); }
  // A slot holding neither `keep_a` nor `keep_b`, settled and emptied:
  // an empty one first, else the one written back longest ago.
  absl::StatusOr<Slot*> FreeSlot(int keep_a, int keep_b);
  // Unit u in a settled slot, read from its file if no slot holds it.
  absl::StatusOr<Slot*> Acquire(int u, int keep);

  OptimizerStoreOptions options_;
  MemoryAccountant* accountant_;
  HostUpdate update_;
  std::vector<std::unique_ptr<BlockFile>> files_;
  std::vector<Slot> slots_;
  int64_t slot_bytes_ = 0;
  // Last: destroyed (joined) before the slots and files their jobs use.
  IoQueue reads_, writes_;
};

absl::Status NvmeStore::Init() {
  slot_bytes_ = 3 * AlignUp(4 * MaxSize(sizes()));
  slots_.resize(kStagingSlots);
  ZS_RETURN_IF_ERROR(AllocateSlots(slots_, slot_bytes_));
  accountant_->Allocated(MemoryKind::kOptimizer, slot_bytes_ * kStagingSlots);
  files_.resize(num_units());
  for (int u = 0; u < num_units(); ++u) {
    const std::string path = absl::StrCat(options_.dir, "/", options_.file_prefix, "u", u, ".opt");
    ZS_ASSIGN_OR_RETURN(files_[u], BlockFile::Create(path));
    accountant_->Allocated(MemoryKind::kOffloaded, FileBytes(u));
    ZS_RETURN_IF_ERROR(Load(u, nullptr, nullptr, nullptr));  // Zeros on file.
  }
  return absl::OkStatus();
}

absl::StatusOr<NvmeStore::Slot*> NvmeStore::FreeSlot(int keep_a, int keep_b) {
  Slot* best = nullptr;
  for (Slot& s : slots_) {
    if (s.unit != -1 && (s.unit == keep_a || s.unit == keep_b)) continue;
    if (s.unit == -1) {
      best = &s;
      break;
    }
    if (best == nullptr || s.write < best->write) best = &s;
  }
  ZS_CHECK(best != nullptr);  // kStagingSlots > 2.
  ZS_RETURN_IF_ERROR(Settle(*best));
  best->unit = -1;
  return best;
}

absl::StatusOr<NvmeStore::Slot*> NvmeStore::Acquire(int u, int keep) {
  Slot* s = Holding(u);
  if (s == nullptr) {
    ZS_ASSIGN_OR_RETURN(s, FreeSlot(u, keep));
    s->unit = u;
    s->read = reads_.Submit(false, files_[u].get(), s->mem.get(), FileBytes(u), 0);
  }
  ZS_RETURN_IF_ERROR(Settle(*s));
  return s;
}

absl::Status NvmeStore::Update(int u, int next, const AdamWHyperparams& hp, int64_t step,
                               float grad_scale, const float* grad, void* out, DType dtype) {
  ZS_RETURN_IF_ERROR(CheckUnit(u));
  ZS_ASSIGN_OR_RETURN(Slot * s, Acquire(u, next));
  if (next >= 0 && next < num_units() && next != u && Holding(next) == nullptr) {
    ZS_ASSIGN_OR_RETURN(Slot * ahead, FreeSlot(u, next));
    ahead->unit = next;
    ahead->read = reads_.Submit(false, files_[next].get(), ahead->mem.get(), FileBytes(next), 0);
  }
  ZS_RETURN_IF_ERROR(update_.Run(View(*s), hp, step, grad_scale, grad, out, dtype));
  s->write = writes_.Submit(true, files_[u].get(), s->mem.get(), FileBytes(u), 0);
  return absl::OkStatus();
}

absl::Status NvmeStore::Flush() { return WaitWriteBacks(writes_, slots_, options_.timeout); }

absl::Status NvmeStore::Load(int u, const float* master, const float* m, const float* v) {
  ZS_RETURN_IF_ERROR(CheckUnit(u));
  Slot* s = Holding(u);
  if (s != nullptr) {
    ZS_RETURN_IF_ERROR(Settle(*s));
  } else {
    ZS_ASSIGN_OR_RETURN(s, FreeSlot(u, -1));
  }
  s->unit = u;
  const UnitState view = View(*s);
  const float* src[3] = {master, m, v};
  float* dst[3] = {view.master, view.m, view.v};
  for (int k = 0; k < 3; ++k) {
    // The whole segment: the alignment padding on file stays zero.
    std::memset(dst[k], 0, Segment(u));
    if (src[k] != nullptr) std::memcpy(dst[k], src[k], size(u) * 4);
  }
  s->write = writes_.Submit(true, files_[u].get(), s->mem.get(), FileBytes(u), 0);
  return Settle(*s);
}

absl::Status NvmeStore::Read(int u, int64_t offset, int64_t length, float* master, float* m,
                             float* v) {
  ZS_RETURN_IF_ERROR(CheckRange(u, offset, length));
  ZS_ASSIGN_OR_RETURN(Slot * s, Acquire(u, -1));
  const UnitState view = View(*s);
  const float* src[3] = {view.master, view.m, view.v};
  float* dst[3] = {master, m, v};
  for (int k = 0; k < 3; ++k) {
    if (dst[k] != nullptr) std::memcpy(dst[k], src[k] + offset, length * 4);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<OptimizerStore>> CreateNvmeStore(
    const OptimizerStoreOptions& options, std::vector<int64_t> sizes, Device* device,
    MemoryAccountant* accountant) {
  if (options.dir.empty() || ::access(options.dir.c_str(), W_OK | X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("offload dir '", options.dir, "' is not an existing writable directory"));
  }
  auto store = std::make_unique<NvmeStore>(options, std::move(sizes), device, accountant);
  ZS_RETURN_IF_ERROR(store->Init());
  return store;
}

}  // namespace zeroshard::offload_internal
