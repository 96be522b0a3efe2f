// AdamW shard update on a CUDA device (target zeroshard_optim_cuda, built only
// where nvcc exists). Same formula, operation order and arguments as
// AdamWReference in adamw.h, whose results it matches bit for bit.
//
// Every pointer in `shard` is device memory. The kernel is enqueued on
// `stream` (a cudaStream_t; null = the legacy default stream) and runs
// asynchronously: synchronise the stream before reading results.
// Errors: INVALID_ARGUMENT for a negative n, step < 1 or an unsupported
// compute dtype; INTERNAL with the CUDA error text if the launch fails
// (no device, bad pointer). Thread safety: as the CUDA stream.
#pragma once

#include "absl/status/status.h"
#include "worker/optim/adamw.h"

namespace zeroshard {

absl::Status AdamWCuda(const AdamWHyperparams& hp, int64_t step, float grad_scale,
                       const AdamWShard& shard, void* stream);

}  // namespace zeroshard
