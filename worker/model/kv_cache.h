// The KV cache of incremental decoding (kv_decoder.h): per layer, the keys
// and values of every position so far, [kv_heads, positions, head_dim], and
// the causal attention of new queries against them, shared by the families.
//
// How the attention works: for each new query (position pos + i) and head
// h, reading kv head h / (heads / kv_heads): scores = q K^T / sqrt(D) over
// positions 0 .. pos + i, softmax (in double), out = p V. A kv head's keys
// and values are contiguous rows, so the two products are matrix-vector
// products of the kernels' sgemm.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "worker/model/kernels.h"

namespace zeroshard {

// Where one row's heads are: head h of row i at base + i * stride + h * D.
struct HeadRows {
  const float* base = nullptr;
  int64_t stride = 0;
};

class KvCache {
 public:
  KvCache(int layers, int heads, int kv_heads, int head_dim, int positions);

  // Stores the n new rows' keys and values (kv_heads heads each) at
  // positions pos .. pos + n - 1 of `layer`, then writes out [n, heads * D]
  // (row-major) = each new query's attention over positions up to its own.
  // pos + n <= positions (the caller checks).
  void Attend(Kernels& k, int layer, int pos, int n, HeadRows q, HeadRows keys, HeadRows values,
              float* out);

 private:
  const int heads_, kv_heads_, head_dim_, positions_;
  std::vector<std::vector<float>> k_, v_;  // Per layer [kv_heads, positions, head_dim].
  std::vector<float> scores_;
};

}  // namespace zeroshard
