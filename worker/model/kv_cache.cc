#include "worker/model/kv_cache.h"

#include <algorithm>
#include <cmath>

namespace zeroshard {

KvCache::KvCache(int layers, int heads, int kv_heads, int head_dim, int positions)
    : heads_(heads), kv_heads_(kv_heads), head_dim_(head_dim), positions_(positions) {
  const int64_t n = int64_t{kv_heads} * positions * head_dim;
  k_.assign(layers, std::vector<float>(n));
  v_.assign(layers, std::vector<float>(n));
  scores_.resize(positions);
}

void KvCache::Attend(Kernels& k, int layer, int pos, int n, HeadRows q, HeadRows keys,
                     HeadRows values, float* out) {
  const int D = head_dim_;
  const int64_t plane = int64_t{positions_} * D;  // One kv head's rows.
  for (int i = 0; i < n; ++i) {
    for (int g = 0; g < kv_heads_; ++g) {
      const int64_t dst = g * plane + int64_t{pos + i} * D;
      std::copy_n(keys.base + i * keys.stride + int64_t{g} * D, D, k_[layer].data() + dst);
      std::copy_n(values.base + i * values.stride + int64_t{g} * D, D, v_[layer].data() + dst);
    }
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  for (int i = 0; i < n; ++i) {
    const int len = pos + i + 1;  // Causal: positions 0 .. pos + i.
    for (int h = 0; h < heads_; ++h) {
      const int64_t g = h / (heads_ / kv_heads_);
      k.Matmul(false, true, 1, len, D, scale, q.base + i * q.stride + int64_t{h} * D,
               k_[layer].data() + g * plane, 0.0f, scores_.data());
      double top = -INFINITY, sum = 0;
      for (int j = 0; j < len; ++j) top = std::max(top, double{scores_[j]});
      for (int j = 0; j < len; ++j) sum += std::exp(scores_[j] - top);
      for (int j = 0; j < len; ++j) {
        scores_[j] = static_cast<float>(std::exp(scores_[j] - top) / sum);
      }
      k.Matmul(false, false, 1, D, len, 1.0f, scores_.data(), v_[layer].data() + g * plane, 0.0f,
               out + (int64_t{i} * heads_ + h) * D);
    }
  }
}

}  // namespace zeroshard
