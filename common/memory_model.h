// The memory model: the bytes one rank holds at a ZeRO stage, by kind, with
// padding, offload and redundancy, as pure functions of the shard plan. The
// engine's accounting (worker/engine/sharded_engine.h, memory()) is what it
// predicts, exactly; `zeroshard plan`, `launch --stage auto` and launch's
// memory refusal all ask it (one model, checked against measured runs in
// tests/engine/memory_model_engine_test.cc).
//
// Sources: the ZeRO paper (Rajbhandari et al., SC'20), section 5.1 and
// Figure 1 (model states 2Ψ + 2Ψ + KΨ, K = 12, partitioned by stage), and
// the stage table of shared/DESIGN.md "Step at each stage"; the paper's
// formula itself is ZeroFormulaBytes (zero_memory.h). Here it is applied to
// the plan's padded sizes (common/shard_plan.h), per unit, so padding is
// included: with P_u the padded and S_u = P_u / N the shard elements of unit
// u, c and g the compute and reduce dtype sizes, and n_u the optimizer range
// ([Note: optimizer range]: P_u at stage 0, S_u at stages 1-3):
//   params    c * sum(P_u)   (stages 0-2)     c * sum(S_u)   (stage 3)
//   grads     g * sum(P_u)   (stages 0-1)     g * sum(S_u)   (stages 2-3)
//   optimizer 12 * sum(n_u)  in device memory; 8 * sum(n_u) with fp32
//             compute and no parameter offload, where the master weights
//             are part of the compute copy (the engine's master_is_params,
//             worker/engine/engine_context.h); or offloaded
//             (ZeRO-Offload, Ren et al., ATC'21; ZeRO-Infinity, SC'21):
//     host:   0 on the device; 12 sum(n_u) host bytes ("offloaded");
//     nvme:   3 staging slots of 3 * AlignUp(4 max n_u) host bytes stay
//             counted as optimizer; files of 3 * AlignUp(4 n_u) per unit
//             are "offloaded" (worker/offload/optimizer_store.h).
//     On a CUDA device either adds 8 max n_u pinned bytes (the gradient and
//     the new compute shard of the host update), counted as buffers.
//   params nvme (--offload-params nvme, stage 3; ZeRO-Infinity): params
//             = ParamStagingBytes(prefetch, c max S_u), the host staging
//             slots; files of AlignUp(c S_u) per unit are "offloaded".
//   redundancy (--redundancy 1, worker/trainer/peer_replica.h): host copies
//     of the own and the ring neighbour's optimizer shard, 24 sum(n_u),
//     peaking at 36 sum(n_u) while a refresh receives the new neighbour
//     copy beside the last one; 12 sum(n_u) at stage 0 or N = 1 (only the
//     own snapshot).
//   gather buffers: the engine's transient bound (GatherBufferBound).
// Activation bytes are the caller's (worker/model ModelActivationBytes).
//
// Units: bytes. Thread-safe: pure functions over values.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "common/job_choices.h"
#include "common/shard_plan.h"
#include "common/zero_memory.h"

namespace zeroshard {

// OptimizerOffload: common/job_choices.h.
// "none" | "host" | "nvme"; INVALID_ARGUMENT naming the value otherwise.
absl::StatusOr<OptimizerOffload> ParseOptimizerOffload(const std::string& text);
const char* OptimizerOffloadName(OptimizerOffload offload);

// The NVMe store's block (O_DIRECT alignment) and its staging slot count;
// worker/offload uses these very constants.
inline constexpr int64_t kOffloadBlockBytes = 4096;
inline constexpr int kOffloadStagingSlots = 3;
inline int64_t AlignToOffloadBlock(int64_t bytes) {
  return (bytes + kOffloadBlockBytes - 1) / kOffloadBlockBytes * kOffloadBlockBytes;
}

// Bytes of host staging an offloaded optimizer store keeps for units of at
// most `max_n` elements of optimizer range (see above): nvme 3 slots; on a
// CUDA device + 8 max_n pinned bytes; 0 for kNone.
int64_t OffloadStagingBytes(OptimizerOffload offload, int64_t max_n, bool cuda);

// Bytes of host staging the stage-3 parameter store (--offload-params nvme,
// worker/offload/param_store.h) keeps: prefetch + 1 slots of
// AlignUp(largest compute shard bytes).
inline int64_t ParamStagingBytes(int prefetch, int64_t max_shard_bytes) {
  return (prefetch + 1) * AlignToOffloadBlock(max_shard_bytes);
}

struct MemoryModelInputs {
  int stage = 0;                       // ZeRO stage 0..3.
  DType compute_dtype = DType::kFp32;  // c: kFp32 (4) or kBf16 (2).
  DType reduce_dtype = DType::kFp32;   // g.
  OptimizerOffload offload_optimizer = OptimizerOffload::kNone;
  // --offload-params nvme: the stage-3 compute shards go to files, read
  // `offload_prefetch` units ahead of their all-gather.
  bool offload_params_nvme = false;
  int offload_prefetch = 2;      // --offload-prefetch, 0..64.
  int gather_prefetch = 1;       // Stage 3: --gather-prefetch, 0..64.
  int64_t bucket_bytes = 0;      // Stages 2-3: --bucket-mib in bytes, >= 0 (0 = none).
  bool cuda = false;             // The device is a GPU (host memory is then apart).
  int redundancy = 0;            // --redundancy 0|1.
  int64_t activation_bytes = 0;  // The model's activations and scratch, the caller's.
};

struct MemoryPrediction {
  // What the engine's memory() reads after a step: params, grads, optimizer,
  // buffers (resident ones only: the pinned host-update staging), offloaded;
  // and redundancy (the trainer's PeerReplica).
  MemoryByKind state;
  int64_t gather_buffers = 0;  // Transient bound during a step (GatherBufferBound).
  int64_t activations = 0;
  int64_t host_offload = 0;  // Of state.offloaded: bytes in host memory.
  int64_t nvme = 0;          // Of state.offloaded: bytes in NVMe files.
  // The device's peak: model state + buffers + gather bound + activations.
  int64_t device_peak() const { return state.total() + gather_buffers + activations; }
  // Host memory besides the device: offloaded host state and redundancy.
  int64_t host_extra() const { return host_offload + state.redundancy; }
  // One CPU worker's RAM (device and host are the same memory).
  int64_t cpu_worker_bytes() const { return device_peak() + host_extra(); }
};

// The engine's bound on transient buffer bytes (ShardedEngine::
// BufferBytesBound, which calls this): with P the largest padded unit and d
// the gather prefetch (EngineOptions::prefetch),
//   stage 3 keeps the unit in use and the d prefetched ones gathered in c,
//   (1 + d) c P, plus the fp32 view under bf16 compute; stages 0-2 only the
//   bf16 view;
//   the bracket's fp32 gradient view, plus one reduce-scatter staging in
//   flight (g P) at stages 2-3;
//   Step's fp32 gradient conversion; + 8 bytes (the squared-norm scalar).
// With buckets of B bytes (EngineOptions::bucket_bytes > 0) a gather bucket
// holds G = max(P, min(B / c, total padded)) elements and a reduce bucket R
// = max(P, min(B / g, total padded)): stage 3 keeps (1 + d) buckets, at
// most every unit, min((1 + d) G, total) c; the reduce-scatter in flight is
// g R; and at stages 2-3 the fp32 gradients waiting in the reduce bucket,
// which is issued as soon as it holds B bytes, add 4 min(B / g, total).
int64_t GatherBufferBound(const ShardPlan& plan, int stage, DType compute_dtype, DType reduce_dtype,
                          int prefetch, int64_t bucket_bytes = 0);

// Every kind for one rank of `plan` (ranks' shards are equal).
// INVALID_ARGUMENT for a stage outside 0..3, a dtype other than fp32/bf16,
// params offload below stage 3, a prefetch outside 0..64, redundancy
// outside 0..1, negative activations.
absl::StatusOr<MemoryPrediction> PredictMemory(const ShardPlan& plan, const MemoryModelInputs& in);

// From a bare parameter count Ψ on `world_size` ranks: the paper's formula
// (ZeroFormulaBytes, no padding) with offload and redundancy; gather buffers
// and activations depend on the model's structure and are left 0 (the
// caller says so). Errors as PredictMemory, and world_size < 1 or psi < 0.
absl::StatusOr<MemoryPrediction> PredictMemoryFromParams(int64_t psi, int world_size,
                                                         const MemoryModelInputs& in);

}  // namespace zeroshard
