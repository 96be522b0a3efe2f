// The job config's AdamW hyperparameters (common/job_config.h), as the
// engine and every baseline that stands for the same job use them. `lr` is
// the peak rate: the schedule is LearningRateAt(job, step).
// Thread safety: a pure function.
#pragma once

#include "common/job_config.h"
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

}  // namespace zeroshard
