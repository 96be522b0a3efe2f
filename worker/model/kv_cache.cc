#include "worker/model/kv_cache.h"

#include "common/status_macros.h"

namespace zeroshard {

absl::Status KvCache::Allocate(Device* device, MemoryAccountant* accountant, int layers) {
  const int64_t bytes = int64_t{kv_heads_} * positions_ * head_dim_ * int64_t{sizeof(float)};
  k_.clear();
  v_.clear();
  for (int l = 0; l < layers; ++l) {
    for (std::vector<DeviceBuffer>* side : {&k_, &v_}) {
      side->emplace_back(device, accountant, MemoryKind::kBuffers);
      ZS_RETURN_IF_ERROR(side->back().Allocate(bytes));
    }
  }
  return absl::OkStatus();
}

void KvCache::Attend(Kernels& k, int layer, int pos, int n, HeadRows q, HeadRows keys,
                     HeadRows values, float* out) {
  DecodeAttentionShape s;
  s.pos = pos;
  s.n = n;
  s.NH = heads_;
  s.KV = kv_heads_;
  s.D = head_dim_;
  s.P = positions_;
  s.q_stride = q.stride;
  s.kv_stride = keys.stride;  // The families' keys and values share a row layout.
  k.DecodeAttention(s, q.base, keys.base, values.base, k_[layer].as<float>(), v_[layer].as<float>(),
                    out);
}

}  // namespace zeroshard
