// The job's choices that are words in its JSON and on the command line and
// enums in the code (JobConfig's device, backend, offload targets,
// activation checkpointing and weight init), each with its table of words
// (common/enum_words.h). Parse*/…Name helpers with their own messages:
// ParseOptimizerOffload (memory_model.h), ParseActivationCheckpointing
// (model_config.h).
#pragma once

#include "common/enum_words.h"

namespace zeroshard {

// Where each worker's engine runs: the CPU, a CUDA GPU, or CUDA where the
// worker sees a GPU and the CPU otherwise.
enum class DeviceChoice { kCpu, kCuda, kAuto };
inline constexpr EnumWords<DeviceChoice, 3> kDeviceWords{
    {{DeviceChoice::kCpu, "cpu"}, {DeviceChoice::kCuda, "cuda"}, {DeviceChoice::kAuto, "auto"}}};

// The collectives: Gloo over TCP; shared memory (the CPU, every rank on one
// host); NCCL; device buffers staged through Gloo (several ranks sharing
// one GPU); auto (nccl on a CUDA device, gloo on the CPU; launch picks shm
// for local CPU workers).
enum class BackendChoice { kGloo, kShm, kNccl, kHostStaged, kAuto };
inline constexpr EnumWords<BackendChoice, 5> kBackendWords{
    {{BackendChoice::kGloo, "gloo"},
     {BackendChoice::kShm, "shm"},
     {BackendChoice::kNccl, "nccl"},
     {BackendChoice::kHostStaged, "host-staged"},
     {BackendChoice::kAuto, "auto"}}};

// --offload-optimizer: master weights and AdamW moments in device memory,
// host memory, or files (NVMe).
enum class OptimizerOffload { kNone, kHost, kNvme };
inline constexpr EnumWords<OptimizerOffload, 3> kOptimizerOffloadWords{
    {{OptimizerOffload::kNone, "none"},
     {OptimizerOffload::kHost, "host"},
     {OptimizerOffload::kNvme, "nvme"}}};

// Stage 3's parameter shards: in device memory, or in files (NVMe).
enum class ParamsOffload { kNone, kNvme };
inline constexpr EnumWords<ParamsOffload, 2> kParamsOffloadWords{
    {{ParamsOffload::kNone, "none"}, {ParamsOffload::kNvme, "nvme"}}};

// What the model keeps for backward (`--activation-checkpointing`):
//   kNone:   every block's activations, from forward to backward;
//   kBlocks: each block keeps only its input; its forward is recomputed
//            during backward (Chen et al., 2016, "Training Deep Nets with
//            Sublinear Memory Cost", section 3).
enum class ActivationCheckpointing { kNone, kBlocks };
inline constexpr EnumWords<ActivationCheckpointing, 2> kActivationCheckpointingWords{
    {{ActivationCheckpointing::kNone, "none"}, {ActivationCheckpointing::kBlocks, "blocks"}}};

// A model directory's weights: its safetensors, or its architecture from
// a random init.
enum class ModelInit { kPretrained, kRandom };
inline constexpr EnumWords<ModelInit, 2> kModelInitWords{
    {{ModelInit::kPretrained, "pretrained"}, {ModelInit::kRandom, "random"}}};

}  // namespace zeroshard
