// Waits for a coordinator's first running generation on the core's own
// change notifications (CoordinatorCore::WaitForGenerationChange, the call
// WatchGeneration streams from): no polling, no sleep.
#pragma once

#include "absl/time/clock.h"
#include "server/core/coordinator_core.h"

namespace zeroshard::server::testing {

// Whether a generation is running within `timeout`.
inline bool AwaitRunningGeneration(CoordinatorCore& core, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  v1::GetGenerationRequest request;
  request.set_job_id(core.job_id());
  uint64_t seen = 0;  // 0: the first call answers at once.
  while (true) {
    auto changed = core.WaitForGenerationChange(request, seen, deadline);
    if (!changed.ok()) return false;
    if (changed->first.state() == v1::GenerationInfo::STATE_RUNNING) return true;
    if (absl::Now() >= deadline) return false;
    seen = changed->second;
  }
}

}  // namespace zeroshard::server::testing
