#include "worker/offload/optimizer_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/memory_model.h"
#include "worker/offload/block_file.h"
#include "worker/offload/offload_model.h"
#include "worker/offload/stores.h"

namespace zeroshard {

// The memory model (common/memory_model.h) predicts the stores with these.
static_assert(kBlockBytes == kOffloadBlockBytes);
static_assert(kStagingSlots == kOffloadStagingSlots);

namespace offload_internal {
int64_t MaxSize(const std::vector<int64_t>& sizes) {
  int64_t n = 0;
  for (int64_t s : sizes) n = std::max(n, s);
  return n;
}
}  // namespace offload_internal

absl::Status OptimizerStore::CheckUnit(int u) const {
  if (u < 0 || u >= num_units()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unit ", u, " out of range [0, ", num_units(), ")"));
  }
  return absl::OkStatus();
}

absl::Status OptimizerStore::CheckRange(int u, int64_t offset, int64_t length) const {
  if (absl::Status s = CheckUnit(u); !s.ok()) return s;
  if (offset < 0 || length < 0 || offset + length > size(u)) {
    return absl::InvalidArgumentError(absl::StrCat("range [", offset, ", ", offset + length,
                                                   ") outside unit ", u, "'s ", size(u),
                                                   " elements"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<OptimizerStore>> CreateOptimizerStore(
    const OptimizerStoreOptions& options, std::vector<int64_t> sizes, Device* device,
    MemoryAccountant* accountant, std::vector<float*> masters) {
  if (!masters.empty() &&
      (options.target != OffloadTarget::kDevice || masters.size() != sizes.size())) {
    return absl::InvalidArgumentError(
        "optimizer store: external masters are for device-resident state, one per unit");
  }
  switch (options.target) {
    case OffloadTarget::kDevice:
      return offload_internal::CreateDeviceStore(std::move(sizes), device, accountant,
                                                 options.timeout, std::move(masters));
    case OffloadTarget::kHost:
      return offload_internal::CreateHostStore(options, std::move(sizes), device, accountant);
    case OffloadTarget::kNvme:
      return offload_internal::CreateNvmeStore(options, std::move(sizes), device, accountant);
  }
  return absl::InvalidArgumentError("unknown offload target");
}

int64_t StagingBytesFor(const OptimizerStoreOptions& options, const std::vector<int64_t>& sizes,
                        DeviceKind device) {
  return OffloadStagingBytes(ToOptimizerOffload(options.target), offload_internal::MaxSize(sizes),
                             device == DeviceKind::kCuda);
}

OptimizerOffload ToOptimizerOffload(OffloadTarget target) {
  switch (target) {
    case OffloadTarget::kDevice:
      return OptimizerOffload::kNone;
    case OffloadTarget::kHost:
      return OptimizerOffload::kHost;
    case OffloadTarget::kNvme:
      return OptimizerOffload::kNvme;
  }
  return OptimizerOffload::kNone;
}

}  // namespace zeroshard
