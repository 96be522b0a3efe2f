// A rank's engine parts without an engine or a model (engine_parts_test.cc):
// a plan of `sizes` fp32 units, the CPU device, the memory accountant, the
// collective tracker, and the units with their resident buffers allocated
// as ShardedEngine allocates them, for one stage at `comm`'s world size.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/shard_plan.h"
#include "common/status_macros.h"
#include "worker/device/cpu_device.h"
#include "worker/engine/collective_tracker.h"
#include "worker/engine/engine_context.h"
#include "worker/engine/engine_options.h"

namespace zeroshard::testing {

struct PartsRig {
  PartsRig(const std::vector<int64_t>& sizes, int stage, Communicator* comm,
           int64_t bucket_bytes = 0, int prefetch = 1)
      : tracker(comm, absl::Seconds(20)), units(sizes.size()) {
    std::vector<UnitSpec> specs;
    for (size_t u = 0; u < sizes.size(); ++u) {
      specs.push_back({"u" + std::to_string(u), {{"w" + std::to_string(u), {sizes[u]}}}});
    }
    plan = *MakeShardPlan(specs, comm->world_size(), 2);
    options.stage = stage;
    options.bucket_bytes = bucket_bytes;
    options.prefetch = prefetch;
    options.collective_timeout = absl::Seconds(20);
    ctx = EngineContext{&plan,  &options,     &device,           comm, &accountant, &tracker,
                        &units, comm->rank(), comm->world_size()};
    const ZeroStage& z = ZeroStageOf(stage);
    for (size_t u = 0; u < units.size(); ++u) {
      EngineUnit& unit = units[u];
      unit.plan = &plan.units[u];
      unit.opt_range = OptimizerRange(*unit.plan, stage, comm->rank());
      const int64_t P = unit.plan->padded_numel, S = unit.plan->shard_numel;
      ctx.InitBuffers(unit);
      ZS_CHECK(unit.params.Allocate((z.shards_params ? S : P) * 4).ok());
      ZS_CHECK(unit.grads.Allocate((z.shards_grads ? S : P) * 4).ok());
    }
  }

  ShardPlan plan;
  EngineOptions options;
  CpuDevice device{1};
  MemoryAccountant accountant;
  CollectiveTracker tracker;
  std::vector<EngineUnit> units;
  EngineContext ctx;
};

}  // namespace zeroshard::testing
