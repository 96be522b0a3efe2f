// The reference model as the planner sees it (common/run_plan.h): its units,
// the order its ForwardBackward brackets them (gpt_model.h "Hook order"),
// its activation bytes in both checkpointing modes (ModelActivationBytes),
// and the micro-batches the trainer runs per step and rank.
//
// Checkpointing assumption: with --activation-checkpointing blocks the
// recompute of block i runs inside block i's backward bracket, on the
// parameters PreBackward gathered (no second gather), so the bracket order,
// and with it the traffic, is the same in both modes. If the recompute
// makes its own PreForward bracket, add it to ModelBrackets.
// Thread-safe: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "common/model/model_config.h"
#include "common/run_plan.h"
#include "common/traffic_model.h"
#include "worker/device/device.h"

namespace zeroshard {

// One micro-batch's brackets. gpt2: forward 0, 1..L, 0; backward 0, L..1, 0.
// llama: forward 0, 1..L; backward head_unit() (head forward and backward,
// llama_model.h), L..1, 0.
std::vector<UnitBracket> ModelBrackets(const ModelConfig& config, ActivationCheckpointing mode);

// Micro-batches per step on the widest rank (generation_trainer.cc):
// ceil(ceil(global_batch / workers) / micro_batch).
int MicroBatchesPerStep(int global_batch, int workers, int micro_batch);

// The planner's model: units, brackets and activations of both modes for
// micro-batches of `micro_batch` sequences of `seq_len` tokens. With `cuda`
// the activations include the CUDA kernels' workspace
// (ModelKernelsScratchBytes), which lives in device memory beside them; the
// CPU's matmul scratch is per call and left out.
PlanModel MakePlanModel(const ModelConfig& config, int micro_batch, int seq_len, int micro_batches,
                        DType compute_dtype, DType reduce_dtype, bool cuda = false);

// Bytes the kernels allocate beyond the model's activations, in the device's
// memory, for a micro-batch of B sequences of T tokens: on the CPU the
// matmuls' scratch reserve (CpuKernelsScratchBytes); on CUDA the one
// workspace's largest use (cuda_kernels.h): the attention backward's
// 7 B*T*C + B*NH*T*T floats, or a bf16 matmul's rounded inputs, at most
// ((B*T + C) * max(4C, V) + B*T*C) / 2 floats (counted whatever the dtype).
int64_t ModelKernelsScratchBytes(DeviceKind kind, const ModelConfig& model, int B, int T);

}  // namespace zeroshard
