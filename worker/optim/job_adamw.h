// The job config's AdamW hyperparameters (common/model/job_config.h), as the
// engine and every baseline that stands for the same job use them. `lr` is
// the peak rate: the schedule is LearningRateAt(job, step). Also the
// gradient-clipping coefficient they share.
// Thread safety: pure functions.
#pragma once

#include <algorithm>

#include "common/model/job_config.h"
#include "worker/optim/adamw.h"

namespace zeroshard {

inline AdamWHyperparams JobAdamW(const JobConfig& job) {
  AdamWHyperparams hp;
  hp.lr = static_cast<float>(job.lr);
  hp.beta1 = static_cast<float>(job.beta1);
  hp.beta2 = static_cast<float>(job.beta2);
  hp.eps = static_cast<float>(job.eps);
  hp.weight_decay = static_cast<float>(job.weight_decay);
  return hp;
}

// torch.nn.utils.clip_grad_norm_'s coefficient min(1, max_norm / (norm +
// 1e-6)) for a global gradient norm `grad_norm` (max_norm > 0).
inline double ClipCoefficient(double max_norm, double grad_norm) {
  return std::min(1.0, max_norm / (grad_norm + 1e-6));
}

}  // namespace zeroshard
