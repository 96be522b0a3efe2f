// kHost: the state in host memory (pinned on a CUDA device, so the copies
// of HostUpdate are asynchronous DMA), counted as kOffloaded, updated on the
// host by HostUpdate.
#include <array>
#include <cstring>

#include "common/status_macros.h"
#include "worker/offload/host_update.h"
#include "worker/offload/stores.h"

namespace zeroshard::offload_internal {
namespace {

class HostStore final : public OptimizerStore {
 public:
  HostStore(const OptimizerStoreOptions& o, std::vector<int64_t> sizes, Device* device,
            MemoryAccountant* accountant)
      : OptimizerStore(std::move(sizes)),
        device_(device),
        accountant_(accountant),
        update_(device, accountant, MaxSize(this->sizes()), o.cpu_threads, o.timeout) {}

  ~HostStore() override {
    for (int u = 0; u < static_cast<int>(units_.size()); ++u) {
      for (float* p : units_[u]) {
        if (p == nullptr) continue;
        device_->FreePinnedHost(p);
        accountant_->Freed(MemoryKind::kOffloaded, size(u) * 4);
      }
    }
  }

  absl::Status Init() {
    units_.assign(num_units(), {nullptr, nullptr, nullptr});
    for (int u = 0; u < num_units(); ++u) {
      for (float*& p : units_[u]) {
        ZS_ASSIGN_OR_RETURN(void* mem, device_->AllocatePinnedHost(size(u) * 4));
        p = static_cast<float*>(mem);
        std::memset(p, 0, size(u) * 4);
        accountant_->Allocated(MemoryKind::kOffloaded, size(u) * 4);
      }
    }
    return absl::OkStatus();
  }

  OffloadTarget target() const override { return OffloadTarget::kHost; }

  absl::Status Load(int u, const float* master, const float* m, const float* v) override {
    ZS_RETURN_IF_ERROR(CheckUnit(u));
    const float* src[3] = {master, m, v};
    for (int k = 0; k < 3; ++k) {
      if (src[k] == nullptr) {
        std::memset(units_[u][k], 0, size(u) * 4);
      } else {
        std::memcpy(units_[u][k], src[k], size(u) * 4);
      }
    }
    return absl::OkStatus();
  }

  absl::Status Read(int u, int64_t offset, int64_t length, float* master, float* m,
                    float* v) override {
    ZS_RETURN_IF_ERROR(CheckRange(u, offset, length));
    float* dst[3] = {master, m, v};
    for (int k = 0; k < 3; ++k) {
      if (dst[k] != nullptr) std::memcpy(dst[k], units_[u][k] + offset, length * 4);
    }
    return absl::OkStatus();
  }

  absl::Status Update(int u, int /*next*/, const AdamWHyperparams& hp, int64_t step,
                      float grad_scale, const float* grad, void* out, DType dtype) override {
    ZS_RETURN_IF_ERROR(CheckUnit(u));
    const UnitState s{units_[u][0], units_[u][1], units_[u][2], size(u)};
    return update_.Run(s, hp, step, grad_scale, grad, out, dtype);
  }

  absl::Status Flush() override { return absl::OkStatus(); }

 private:
  Device* device_;
  MemoryAccountant* accountant_;
  HostUpdate update_;
  std::vector<std::array<float*, 3>> units_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<OptimizerStore>> CreateHostStore(
    const OptimizerStoreOptions& options, std::vector<int64_t> sizes, Device* device,
    MemoryAccountant* accountant) {
  auto store = std::make_unique<HostStore>(options, std::move(sizes), device, accountant);
  ZS_RETURN_IF_ERROR(store->Init());
  return store;
}

}  // namespace zeroshard::offload_internal
