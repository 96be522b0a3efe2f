// Kernels::DecodeAttention on the CPU (kernels.h): the new rows' keys and
// values copied into the cache, then per new query and head two
// matrix-vector products on the sgemm (scores = q K^T / sqrt(D) over the
// cached rows, out = p V; a kv head's rows are contiguous) around a softmax
// summed in double.
#include <algorithm>
#include <cmath>
#include <vector>

#include "worker/model/cpu_kernels_internal.h"

namespace zeroshard {

void CpuDecodeAttention(const DecodeAttentionShape& s, const float* q, const float* k_new,
                        const float* v_new, float* k_cache, float* v_cache, float* out) {
  const int D = s.D;
  const int64_t plane = int64_t{s.P} * D;  // One kv head's rows.
  for (int i = 0; i < s.n; ++i) {
    for (int g = 0; g < s.KV; ++g) {
      const int64_t dst = g * plane + int64_t{s.pos + i} * D;
      std::copy_n(k_new + i * s.kv_stride + int64_t{g} * D, D, k_cache + dst);
      std::copy_n(v_new + i * s.kv_stride + int64_t{g} * D, D, v_cache + dst);
    }
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  std::vector<float> scores(static_cast<size_t>(s.pos + s.n));
  for (int i = 0; i < s.n; ++i) {
    const int len = s.pos + i + 1;  // Causal: positions 0 .. pos + i.
    for (int h = 0; h < s.NH; ++h) {
      const int64_t g = h / (s.NH / s.KV);
      CpuSgemm(false, true, 1, len, D, scale, q + i * s.q_stride + int64_t{h} * D, D,
               k_cache + g * plane, D, 0.0f, scores.data(), len);
      double top = -INFINITY, sum = 0;
      for (int j = 0; j < len; ++j) top = std::max(top, double{scores[j]});
      for (int j = 0; j < len; ++j) sum += std::exp(scores[j] - top);
      for (int j = 0; j < len; ++j) scores[j] = static_cast<float>(std::exp(scores[j] - top) / sum);
      CpuSgemm(false, false, 1, D, len, 1.0f, scores.data(), len, v_cache + g * plane, D, 0.0f,
               out + (int64_t{i} * s.NH + h) * D, D);
    }
  }
}

}  // namespace zeroshard
