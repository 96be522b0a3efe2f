// kDevice: the state in device memory (DeviceBuffers, kOptimizer), updated
// by Device::AdamW on the device's stream. The engine's behaviour before
// offload existed. The master may be the caller's (CreateOptimizerStore's
// `masters`): then only m and v are the store's.
#include <array>

#include "common/status_macros.h"
#include "worker/device/device_buffer.h"
#include "worker/offload/stores.h"

namespace zeroshard::offload_internal {
namespace {

class DeviceStore final : public OptimizerStore {
 public:
  DeviceStore(std::vector<int64_t> sizes, Device* device, absl::Duration timeout,
              std::vector<float*> masters)
      : OptimizerStore(std::move(sizes)),
        device_(device),
        timeout_(timeout),
        masters_(std::move(masters)) {}

  absl::Status Init(MemoryAccountant* accountant) {
    units_.resize(num_units());
    for (int u = 0; u < num_units(); ++u) {
      for (int k = masters_.empty() ? 0 : 1; k < 3; ++k) {
        DeviceBuffer& b = units_[u][k];
        b = DeviceBuffer(device_, accountant, MemoryKind::kOptimizer);
        ZS_RETURN_IF_ERROR(b.Allocate(size(u) * 4));
      }
      if (!masters_.empty()) {
        ZS_RETURN_IF_ERROR(device_->Memset(masters_[u], 0, size(u) * 4));
      }
    }
    return absl::OkStatus();
  }

  OffloadTarget target() const override { return OffloadTarget::kDevice; }

  absl::Status Load(int u, const float* master, const float* m, const float* v) override {
    ZS_RETURN_IF_ERROR(CheckUnit(u));
    const float* src[3] = {master, m, v};
    const UnitState s = Resident(u);
    float* dst[3] = {s.master, s.m, s.v};
    for (int k = 0; k < 3; ++k) {
      if (src[k] == dst[k]) continue;  // Written in place (Resident): kept as it is.
      ZS_RETURN_IF_ERROR(src[k] == nullptr ? device_->Memset(dst[k], 0, s.n * 4)
                                           : device_->Copy(dst[k], src[k], s.n * 4));
    }
    return device_->Synchronize(timeout_);  // The caller's arrays are read.
  }

  absl::Status Read(int u, int64_t offset, int64_t length, float* master, float* m,
                    float* v) override {
    ZS_RETURN_IF_ERROR(CheckRange(u, offset, length));
    float* dst[3] = {master, m, v};
    const UnitState s = Resident(u);
    const float* src[3] = {s.master, s.m, s.v};
    for (int k = 0; k < 3; ++k) {
      if (dst[k] == nullptr) continue;
      ZS_RETURN_IF_ERROR(device_->Copy(dst[k], src[k] + offset, length * 4));
    }
    return device_->Synchronize(timeout_);
  }

  absl::Status Update(int u, int /*next*/, const AdamWHyperparams& hp, int64_t step,
                      float grad_scale, const float* grad, void* out, DType dtype) override {
    ZS_RETURN_IF_ERROR(CheckUnit(u));
    const UnitState s = Resident(u);
    return device_->AdamW(hp, step, grad_scale, {s.master, s.m, s.v, grad, s.n, out, dtype});
  }

  absl::Status Flush() override { return absl::OkStatus(); }

  UnitState Resident(int u) const override {
    const auto& b = units_[u];
    float* master = masters_.empty() ? b[0].as<float>() : masters_[u];
    return {master, b[1].as<float>(), b[2].as<float>(), size(u)};
  }

 private:
  Device* device_;
  absl::Duration timeout_;
  std::vector<float*> masters_;  // The caller's, or empty: units_[u][0].
  std::vector<std::array<DeviceBuffer, 3>> units_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<OptimizerStore>> CreateDeviceStore(std::vector<int64_t> sizes,
                                                                  Device* device,
                                                                  MemoryAccountant* accountant,
                                                                  absl::Duration timeout,
                                                                  std::vector<float*> masters) {
  auto store = std::make_unique<DeviceStore>(std::move(sizes), device, timeout, std::move(masters));
  ZS_RETURN_IF_ERROR(store->Init(accountant));
  return store;
}

}  // namespace zeroshard::offload_internal
