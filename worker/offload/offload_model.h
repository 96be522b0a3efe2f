// The memory model's name (common/memory_model.h) for an optimizer store
// target (optimizer_store.h), so the engine and tests ask the model about
// the store they built. Thread-safe: a pure function.
#pragma once

#include "common/memory_model.h"
#include "worker/offload/optimizer_store.h"

namespace zeroshard {

OptimizerOffload ToOptimizerOffload(OffloadTarget target);

}  // namespace zeroshard
