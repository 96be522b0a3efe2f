// The ShardedEngine's options and the result of one step (sharded_engine.h
// says what each stage, prefetch and bucket does with them).
#pragma once

#include <cstdint>

#include "absl/time/time.h"
#include "common/dtype.h"
#include "worker/comm/communicator.h"
#include "worker/device/device.h"
#include "worker/offload/optimizer_store.h"
#include "worker/offload/param_store.h"
#include "worker/optim/adamw.h"

namespace zeroshard {

struct EngineOptions {
  int stage = 0;                       // ZeRO stage, 0..3.
  DType compute_dtype = DType::kFp32;  // Compute copy: kFp32 or kBf16.
  DType reduce_dtype = DType::kFp32;   // Gradient storage and reduction: kFp32 or kBf16.
  AdamWHyperparams adamw;              // lr, betas, eps, weight decay.
  float max_grad_norm = 0.0f;          // Global-norm clipping; <= 0 = off.
  absl::Duration collective_timeout = absl::Seconds(60);  // Per collective wait.
  int optimizer_threads = 0;                              // AdamWCpu threads; 0 = hardware.
  // Stage 3: units all-gathered ahead of their use, in the recorded order
  // (--gather-prefetch), 0..64; 0 gathers each unit when it is opened. With
  // buckets (bucket_bytes) it counts buckets, and 0 gathers the rest of the
  // open unit's bucket with it.
  int prefetch = 1;
  // Stages 2-3 (--bucket-mib): collectives fused over units up to this many
  // bytes (gathered compute copy for all-gathers, reduce dtype for
  // reduce-scatters); 0 = one unit per collective. See "buckets" above.
  int64_t bucket_bytes = 0;
  // Where every buffer lives; null = a CPU device the engine owns (with
  // optimizer_threads threads). Must outlive the engine.
  Device* device = nullptr;
  // Control values (the squared global norm) travel here, in host memory;
  // null = `comm`, which must then take host pointers (Gloo). With a
  // device-memory backend (NCCL, host-staged) pass the host communicator.
  Communicator* control_comm = nullptr;
  // Where master, m and v live (worker/offload/optimizer_store.h): device
  // memory (the default), host memory or NVMe files. Results are bit-equal
  // whichever. `offload.timeout` is replaced by collective_timeout.
  OptimizerStoreOptions offload;
  // Stage 3 only (INVALID_ARGUMENT otherwise): the compute shards in NVMe
  // files when `enabled`. `timeout` is replaced by collective_timeout; an
  // empty file_prefix by the optimizer store's.
  ParamStoreOptions params_offload;
  // Device bytes the caller will allocate beside the engine (the model's
  // activations and scratch, a BLAS work buffer), added to the engine's own
  // need in Create's memory check so a run that cannot fit is refused there
  // rather than failing mid-step. Count only what is not allocated yet.
  int64_t reserved_bytes = 0;
};

struct StepResult {
  double grad_norm = 0.0;  // Global L2 norm of the rank-averaged, grad_scale'd gradient.
  double clip_coef = 1.0;  // Multiplier clipping applied (1 = none).
  bool skipped = false;    // Non-finite norm: no update; gradients were zeroed.
  int64_t step = 0;        // Optimizer steps taken so far (after this one).
};

}  // namespace zeroshard
