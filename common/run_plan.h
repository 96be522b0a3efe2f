// Sizing a run to a machine: every stage x activation checkpointing x
// optimizer offload choice, its predicted memory (memory_model.h), traffic
// and communication time (traffic_model.h), whether it fits, and the
// recommendation `zeroshard plan` prints and `launch --stage auto` follows.
//
// Fit, per choice:
//   CPU workers (device memory is host memory): workers * (cpu_worker_bytes
//     + worker_host_bytes + process_overhead) <= host memory.
//   GPU workers: device_peak <= device memory per rank; workers *
//     (host_extra + worker_host_bytes) <= host memory (when given); workers * nvme bytes <= the
//     NVMe size (an nvme choice without --nvme does not fit).
// Recommendation (the standard advice, ZeRO paper section 5 and DeepSpeed's
// "use the lowest stage that fits"): among the fitting choices, no offload
// first, then host, then nvme; within that group the lowest stage without
// checkpointing (A) unless a lower stage fits only with block checkpointing
// (B) and B moves fewer bytes per step (shorter communication time at the
// given bandwidth): then B, at the price of recomputing each block's
// forward in backward (about one more forward pass).
//
// Units: bytes, seconds, bytes per second. Thread-safe: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/memory_model.h"
#include "common/traffic_model.h"

namespace zeroshard {

// A CPU worker's RAM besides what the model predicts (code, gRPC, oneDNN's GEMM scratch,
// the loaded corpus, allocator slack). Measured (Debian 12, 2 busy cores,
// --threads 1, micro-batch 4, VmHWM at exit, 2 steps): small N=2 stage 0
// 69.4-69.5 MB, small N=4 stage 3 61.3-67.2 MB, medium N=2 stage 1 249.0 MB,
// medium N=4 stage 3 209.2-222.4 MB; minus the predicted model terms that
// leaves 34-53 MB. 40 MiB (41.9 MB) keeps every case within about 9%: the
// small workers, whose gather-buffer bound (an upper bound) is loosest
// relative to their size, are over-predicted most. (An idle-sized tiny
// worker peaks at 54 MB: its fixed part is larger because for small and
// medium the bound already covers part of the slack.)
// tests/trainer/peak_rss_test.cc checks the sum against measured VmHWM.
inline constexpr int64_t kCpuWorkerOverheadBytes = int64_t{40} << 20;

struct PlanMachine {
  int workers = 1;                   // Ranks (N), all on this machine for the host figures.
  bool cuda = false;                 // GPU workers: device memory is apart from host memory.
  int64_t device_memory = 0;         // Per rank (GPU); ignored on the CPU. 0 = unknown.
  int64_t host_memory = 0;           // This machine's, all workers together. 0 = unknown.
  int64_t nvme = 0;                  // Free NVMe bytes for offload files; 0 = none.
  double link_bytes_per_second = 0;  // Bus bandwidth; 0 = no time estimate.
  int64_t process_overhead = kCpuWorkerOverheadBytes;  // Per CPU worker.
};

struct PlanModel {
  // The units (with a structure) or, when empty, a bare parameter count.
  std::vector<UnitSpec> units;
  int64_t params = 0;     // Ψ; filled from units when they are given.
  int64_t alignment = 1;  // Shard plan alignment (elements).
  DType compute_dtype = DType::kFp32;
  DType reduce_dtype = DType::kFp32;
  int micro_batches = 1;  // Forward/backward passes per step and rank.
  // Per checkpointing mode (0 = none, 1 = blocks): one micro-batch's
  // brackets and the activation bytes (worker/model ModelActivationBytes).
  std::vector<UnitBracket> brackets[2];
  int64_t activation_bytes[2] = {0, 0};
  // Host bytes a worker holds beside the engine while it starts: the
  // initial fp32 values of one unit at a time, the largest counted
  // (worker/trainer/engine_setup.h InitialUnits).
  int64_t worker_host_bytes = 0;
  // --offload-params nvme: the stage-3 choices keep only the parameter
  // store's staging slots resident (prefetch + 1, memory_model.h).
  bool offload_params_nvme = false;
  int offload_prefetch = 2;
  int gather_prefetch = 1;   // Stage 3: units all-gathered ahead (--gather-prefetch).
  int64_t bucket_bytes = 0;  // Stages 2-3: --bucket-mib in bytes.
  bool has_structure() const { return !units.empty(); }
};

struct PlanChoice {
  int stage = 0;
  bool checkpointing = false;  // --activation-checkpointing blocks.
  OptimizerOffload offload = OptimizerOffload::kNone;
  MemoryPrediction memory;
  TrafficPrediction traffic;
  double comm_seconds = 0;  // traffic.seconds(link), 0 when unknown.
  int64_t device_need = 0;  // Per rank: device_peak (GPU) or RAM per CPU worker.
  int64_t host_need = 0;    // This machine's host RAM, all workers.
  int64_t nvme_need = 0;    // All workers' offload files.
  bool fits = false;
  std::string why_not;       // When !fits: the first limit exceeded.
  std::string Name() const;  // "stage 2, checkpointing blocks, offload none"
};

struct RunPlan {
  std::vector<PlanChoice> choices;  // Stage-major, then checkpointing, then offload.
  int recommended = -1;             // Index into choices; -1 = nothing fits.
  std::string reason;               // Why, in one or two sentences.
};

// INVALID_ARGUMENT for workers < 1, micro_batches < 1, an invalid unit list
// (MakeShardPlan's errors), a bare count < 0.
absl::StatusOr<RunPlan> MakeRunPlan(const PlanModel& model, const PlanMachine& machine);

}  // namespace zeroshard
