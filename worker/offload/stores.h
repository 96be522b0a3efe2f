// The OptimizerStore implementations' factories (optimizer_store.h), one per
// file: device_store.cc, host_store.cc, nvme_store.cc. Internal to
// worker/offload.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/offload/optimizer_store.h"

namespace zeroshard::offload_internal {

absl::StatusOr<std::unique_ptr<OptimizerStore>> CreateDeviceStore(std::vector<int64_t> sizes,
                                                                  Device* device,
                                                                  MemoryAccountant* accountant,
                                                                  absl::Duration timeout,
                                                                  std::vector<float*> masters);
absl::StatusOr<std::unique_ptr<OptimizerStore>> CreateHostStore(
    const OptimizerStoreOptions& options, std::vector<int64_t> sizes, Device* device,
    MemoryAccountant* accountant);
absl::StatusOr<std::unique_ptr<OptimizerStore>> CreateNvmeStore(
    const OptimizerStoreOptions& options, std::vector<int64_t> sizes, Device* device,
    MemoryAccountant* accountant);

int64_t MaxSize(const std::vector<int64_t>& sizes);

}  // namespace zeroshard::offload_internal
