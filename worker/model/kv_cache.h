// The KV cache of incremental decoding (kv_decoder.h): per layer, the keys
// and values of every position so far, [kv_heads, positions, head_dim] in
// the device's memory, and the causal attention of new queries against
// them (Kernels::DecodeAttention, which also stores the new rows), shared
// by the families.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "worker/device/device_buffer.h"
#include "worker/model/kernels.h"

namespace zeroshard {

// Where one row's heads are: head h of row i at base + i * stride + h * D.
struct HeadRows {
  const float* base = nullptr;
  int64_t stride = 0;
};

class KvCache {
 public:
  KvCache(int heads, int kv_heads, int head_dim, int positions)
      : heads_(heads), kv_heads_(kv_heads), head_dim_(head_dim), positions_(positions) {}

  // Zeroed keys and values for `layers` layers on `device`, counted in
  // `accountant` (both must outlive the cache); Device::Allocate's error
  // (RESOURCE_EXHAUSTED) otherwise.
  absl::Status Allocate(Device* device, MemoryAccountant* accountant, int layers);

  // Stores the n new rows' keys and values (kv_heads heads each) at
  // positions pos .. pos + n - 1 of `layer`, then writes out [n, heads * D]
  // (row-major) = each new query's attention over positions up to its own.
  // pos + n <= positions() (the caller checks).
  void Attend(Kernels& k, int layer, int pos, int n, HeadRows q, HeadRows keys, HeadRows values,
              float* out);
  int positions() const { return positions_; }

 private:
  const int heads_, kv_heads_, head_dim_, positions_;
  std::vector<DeviceBuffer> k_, v_;  // Per layer [kv_heads, positions, head_dim].
};

}  // namespace zeroshard
