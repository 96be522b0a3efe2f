// The scalar reference AdamW (see adamw.h for the formula and operation
// order). This file is compiled with -ffp-contract=off so that no
// multiply-add is fused and the SIMD and CUDA versions can match it exactly.
#include <cmath>

#include "common/status_macros.h"
#include "worker/optim/adamw.h"
#include "worker/optim/adamw_element.h"

namespace zeroshard {

AdamWScalars MakeAdamWScalars(const AdamWHyperparams& hp, int64_t step, float grad_scale) {
  ZS_CHECK(step >= 1);
  AdamWScalars s;
  s.beta1 = hp.beta1;
  s.one_minus_beta1 = 1.0f - hp.beta1;
  s.beta2 = hp.beta2;
  s.one_minus_beta2 = 1.0f - hp.beta2;
  s.eps = hp.eps;
  const double lr = hp.lr, steps = static_cast<double>(step);
  const double bc1 = 1.0 - std::pow(static_cast<double>(hp.beta1), steps);
  const double bc2 = 1.0 - std::pow(static_cast<double>(hp.beta2), steps);
  s.step_size = static_cast<float>(lr / bc1);
  s.inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
  s.decay = static_cast<float>(1.0 - lr * static_cast<double>(hp.weight_decay));
  s.grad_scale = grad_scale;
  return s;
}

void AdamWReferenceRange(const AdamWScalars& s, const AdamWShard& shard, int64_t begin,
                         int64_t end) {
  float* out32 =
      shard.compute_dtype == DType::kFp32 ? static_cast<float*>(shard.compute_out) : nullptr;
  bf16* out16 =
      shard.compute_dtype == DType::kBf16 ? static_cast<bf16*>(shard.compute_out) : nullptr;
  for (int64_t i = begin; i < end; ++i) {
    const float p = AdamWElement(s, shard.grad[i], shard.master[i], shard.m[i], shard.v[i]);
    if (out32 != nullptr) out32[i] = p;
    if (out16 != nullptr) out16[i] = FloatToBf16(p);
  }
}

void AdamWReference(const AdamWHyperparams& hp, int64_t step, float grad_scale,
                    const AdamWShard& shard) {
  ZS_CHECK(shard.n >= 0);
  ZS_CHECK(shard.compute_dtype == DType::kFp32 || shard.compute_dtype == DType::kBf16);
  AdamWReferenceRange(MakeAdamWScalars(hp, step, grad_scale), shard, 0, shard.n);
}

}  // namespace zeroshard
