// One AdamW element update in the operation order adamw.h fixes. Internal to
// worker/optim. Include only from files compiled with -ffp-contract=off.
#pragma once

#include <cmath>

#include "worker/optim/adamw.h"

namespace zeroshard {

// Updates m, v, master in place; returns the new master value.
inline float AdamWElement(const AdamWScalars& s, float grad, float& master, float& m, float& v) {
  const float g = grad * s.grad_scale;
  m = s.beta1 * m + s.one_minus_beta1 * g;
  v = s.beta2 * v + s.one_minus_beta2 * (g * g);
  const float denom = std::sqrt(v) * s.inv_sqrt_bc2 + s.eps;
  master = master * s.decay - s.step_size * (m / denom);
  return master;
}

// Scalar loop over [begin, end) of a shard (the reference, and SIMD tails).
void AdamWReferenceRange(const AdamWScalars& s, const AdamWShard& shard, int64_t begin,
                         int64_t end);

}  // namespace zeroshard
