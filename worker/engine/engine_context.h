// What the parts of a rank's ShardedEngine share (sharded_engine.h): each
// unit's buffers and bracket state (EngineUnit), and the context every part
// works in (EngineContext): the plan, the options, the device, the data
// communicator, the memory accountant and the collective tracker. The
// engine owns all of it; the parts (GatherScheduler, GradientReducer,
// ShardUpdater) hold an EngineContext by value, whose pointers outlive them.
//
// Thread safety: the engine's training thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/dtype.h"
#include "common/shard_plan.h"
#include "common/zero_stage.h"
#include "worker/comm/communicator.h"
#include "worker/device/device.h"
#include "worker/device/device_buffer.h"
#include "worker/device/memory_accounting.h"
#include "worker/engine/engine_options.h"

namespace zeroshard {

class CollectiveTracker;

// One all-gather (a group of units' with buckets), shared by its units.
struct GatherWork {
  std::unique_ptr<Work> work;  // Null once sequenced or waited.
  bool failed = false;         // Its wait failed: every member's buffer is retired.
};

struct EngineUnit {
  const UnitPlan* plan = nullptr;
  ElementRange opt_range;              // Optimizer state's range of the padded buffer; its
                                       // master, m, v are the optimizer store's unit.
  DeviceBuffer params;                 // kParams, compute dtype: P (stages 0-2) or S (3);
                                       // empty with params offload (the ParamStore holds it).
  DeviceBuffer grads;                  // kGrads, reduce dtype: P (stages 0-1) or S (2-3).
  DeviceBuffer gathered;               // kBuffers, stage 3: P elements, compute dtype.
  std::shared_ptr<GatherWork> gather;  // In flight into `gathered` (and its group's).
  DeviceBuffer view;                   // kBuffers: fp32 params view (bf16 compute).
  DeviceBuffer grad_view;              // kBuffers: fp32 gradient the model adds into.
  const float* param_ptr = nullptr;    // What PreForward/PreBackward hand out.
  float* grad_ptr = nullptr;
  int param_refs = 0;
  int grad_refs = 0;
  // Stages 2-3: `grads` counts as zeros whatever its bytes hold (set at
  // Create and by GradientReducer::Zero, which then writes nothing); the
  // step's first reduce-scatter of the unit writes straight into it instead
  // of being added, and the step zero-fills any unit still unwritten.
  bool grads_zero = true;
};

struct EngineContext {
  const ShardPlan* plan = nullptr;
  const EngineOptions* options = nullptr;  // The engine's (its learning rate changes).
  Device* device = nullptr;
  Communicator* comm = nullptr;  // The data plane.
  MemoryAccountant* accountant = nullptr;
  CollectiveTracker* tracker = nullptr;
  std::vector<EngineUnit>* units = nullptr;
  int rank = 0;
  int world_size = 1;
  // fp32 compute with the optimizer state in device memory and no
  // parameter offload: each unit's master weights are ParamsShard(unit),
  // part of the compute copy itself, which AdamW then updates in place; no
  // separate compute copy is written (28 bytes a parameter, where the master
  // is the parameter, as in PyTorch's fp32 AdamW).
  bool master_is_params = false;

  EngineUnit& unit(int u) const { return (*units)[static_cast<size_t>(u)]; }
  int num_units() const { return static_cast<int>(units->size()); }
  const ZeroStage& stage() const { return ZeroStageOf(options->stage); }
  int64_t cbytes() const { return DTypeSize(options->compute_dtype); }
  int64_t gbytes() const { return DTypeSize(options->reduce_dtype); }
  // A buffer of `kind` on the device, empty.
  DeviceBuffer Buffer(MemoryKind kind) const { return DeviceBuffer(device, accountant, kind); }
  // Gives `unit` its buffers, each empty, of its kind (params, grads, the
  // transient ones).
  void InitBuffers(EngineUnit& unit) const;
  // Moves unit's bracket gradient out (to be reduced); an empty one of its
  // kind stays in its place.
  DeviceBuffer TakeGradView(EngineUnit& unit) const;
  // Allocates inside a hook, which cannot return an error: out of device
  // memory there ends the process with the reason (ZS_CHECK); sizes are
  // bounded by ShardedEngine::BufferBytesBound, checked against free memory
  // at Create. `zeroed` false: contents undefined (a buffer a collective
  // overwrites).
  void MustAllocate(DeviceBuffer& buffer, int64_t bytes, bool zeroed = true) const;
  // The rank's slice of a full buffer of `elem_bytes`-sized elements.
  uint8_t* Slice(const DeviceBuffer& full, int64_t shard_numel, int64_t elem_bytes) const;
  // Elements of unit's compute copy (`params`): its shard at stage 3, else
  // the whole padded unit.
  int64_t ParamsNumel(const EngineUnit& unit) const;
  // The part of unit's compute copy (`params`) the rank's optimizer updates:
  // its slice where the stage gathers after the step (1-2), else the whole
  // buffer (stage 0's, stage 3's shard).
  void* ParamsShard(const EngineUnit& unit) const;
};

}  // namespace zeroshard
