// One rank's training run for engine tests: builds a ShardedEngine over the
// test MLP, trains `steps` steps of the global batch (this rank's contiguous
// slice, in `micro_batches` micro-batches, grad_scale = 1 / micro_batches),
// and returns every unit's full fp32 master values (GatherFullParams) and
// each step's reported global gradient norm.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/engine/test_mlp.h"
#include "worker/comm/communicator.h"
#include "worker/engine/sharded_engine.h"

namespace zeroshard::testing {

struct RunConfig {
  int stage = 0;
  DType compute = DType::kFp32;
  DType reduce = DType::kFp32;
  int steps = 10;
  int global_batch = 24;
  int micro_batches = 2;
  int64_t alignment = 2;
  // Where the engine's buffers live (null: the CPU device the engine owns).
  // A device other than the CPU is driven through HostHooks, since the test
  // MLP computes on the host; so is the CPU one with via_host_hooks.
  Device* device = nullptr;
  bool via_host_hooks = false;
  // The control communicator (null: the data one); needed when `comm` takes
  // device pointers.
  Communicator* control_comm = nullptr;
  // Where the optimizer state lives (default: device memory).
  OptimizerStoreOptions offload;
  // Stage 3: the compute shards in NVMe files when enabled.
  ParamStoreOptions params_offload;
  int64_t bucket_bytes = 0;  // EngineOptions::bucket_bytes (stages 2-3).
  // set_gradient_sync on every micro-batch (stage 0 then all-reduces each
  // micro-batch's gradients as their backward ends); else only on the last,
  // as the trainer does.
  bool sync_every_micro_batch = false;
};

EngineOptions MakeEngineOptions(const RunConfig& config, const RefAdamW& hp);

struct RankResult {
  std::vector<std::vector<float>> params;  // Per unit, numel elements.
  std::vector<double> grad_norms;          // Per step.
};

// Runs fn(rank, comm) for ranks 0..n-1 as threads, each with a Gloo
// communicator over one InMemoryStore on 127.0.0.1 (`prefix` must be unique
// per call). Returns the first non-OK status (or a communicator error).
absl::Status RunRanksAsThreads(int n, const std::string& prefix,
                               const std::function<absl::Status(int, Communicator*)>& fn);

absl::StatusOr<RankResult> TrainRank(const MlpDims& dims, const RefAdamW& hp,
                                     const RunConfig& config, Communicator* comm);

}  // namespace zeroshard::testing
