// What a generation's engine is made from: its options (the job's
// settings, the memory the model and its kernels reserve beside it) and
// each unit's initial values. Thread-safe: pure functions.
#pragma once

#include "common/model/job_config.h"
#include "common/model/model_config.h"
#include "worker/comm/communicator.h"
#include "worker/device/device.h"
#include "worker/engine/sharded_engine.h"
#include "worker/model/model_kernels.h"

namespace zeroshard {

// Each unit's values when the engine is made, one unit at a time: the
// seeded random init (InitUnit), or zeros where a model directory's weights
// follow (LoadBestState restores them, each rank only its shard).
ShardedEngine::UnitInit InitialUnits(const JobConfig& job, const ModelConfig& model);

// The engine's options for `job` on `device`, with the model's activations
// and its kernels' scratch reserved; `control` carries the control values.
EngineOptions MakeEngineOptions(const JobConfig& job, const ModelConfig& model, Device* device,
                                const ModelKernels& kernels, Communicator* control);

}  // namespace zeroshard
