// Waits for a coordinator's running generation over RPC, on the
// WatchGeneration stream (the coordinator's own change notifications; the
// in-process twin is await_generation.h): no polling, no sleep.
#pragma once

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "common/rpc/coordinator_client.h"

namespace zeroshard::server::testing {

// The number of the first running generation of `job_id` with
// `world_size` ranks (any, when 0) within `timeout`; 0 if none ran.
inline uint64_t AwaitRunningGeneration(CoordinatorClient& client, const std::string& job_id,
                                       absl::Duration timeout, int world_size = 0) {
  v1::GetGenerationRequest request;
  request.set_job_id(job_id);
  uint64_t running = 0;
  const absl::Status watched =
      client.WatchGeneration(request, timeout, [&](const v1::GenerationInfo& g) {
        if (g.state() != v1::GenerationInfo::STATE_RUNNING) return true;
        if (world_size > 0 && g.world_size() != world_size) return true;
        running = g.generation();
        return false;
      });
  return watched.ok() ? running : 0;
}

}  // namespace zeroshard::server::testing
