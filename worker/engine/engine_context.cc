#include "worker/engine/engine_context.h"

#include <cstdio>
#include <string>
#include <utility>

#include "common/status_macros.h"

namespace zeroshard {

void EngineContext::MustAllocate(DeviceBuffer& buffer, int64_t bytes, bool zeroed) const {
  absl::Status s = zeroed ? buffer.Allocate(bytes) : buffer.AllocateUninitialized(bytes);
  if (!s.ok()) {
    std::fprintf(stderr, "zeroshard engine: %s\n", std::string(s.message()).c_str());
  }
  ZS_CHECK(s.ok());
}

void EngineContext::InitBuffers(EngineUnit& unit) const {
  unit.params = Buffer(MemoryKind::kParams);
  unit.grads = Buffer(MemoryKind::kGrads);
  for (DeviceBuffer* b : {&unit.gathered, &unit.view, &unit.grad_view}) {
    *b = Buffer(MemoryKind::kBuffers);
  }
}

DeviceBuffer EngineContext::TakeGradView(EngineUnit& unit) const {
  DeviceBuffer taken = std::move(unit.grad_view);
  unit.grad_view = Buffer(MemoryKind::kBuffers);
  return taken;
}

uint8_t* EngineContext::Slice(const DeviceBuffer& full, int64_t shard_numel,
                              int64_t elem_bytes) const {
  return full.as<uint8_t>() + static_cast<int64_t>(rank) * shard_numel * elem_bytes;
}

int64_t EngineContext::ParamsNumel(const EngineUnit& unit) const {
  return stage().shards_params ? unit.plan->shard_numel : unit.plan->padded_numel;
}

void* EngineContext::ParamsShard(const EngineUnit& unit) const {
  if (!stage().gathers_after_step) return unit.params.data();
  return Slice(unit.params, unit.plan->shard_numel, cbytes());
}

}  // namespace zeroshard
