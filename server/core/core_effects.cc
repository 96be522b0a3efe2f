#include "server/core/core_effects.h"

#include <cstdio>

#include "server/state/durable_state.h"

namespace zeroshard::server {

void CoreEffects::Apply(DurableState& durable) const {
  if (generation) {
    if (absl::Status s = durable.SetGeneration(*generation); !s.ok()) {
      std::fprintf(stderr, "zeroshard-coordinator: persisting generation: %s\n",
                   s.ToString().c_str());
    }
  }
  if (lifecycle) {
    if (absl::Status s =
            durable.SetLifecycle(lifecycle->failures, lifecycle->ended, lifecycle->reason);
        !s.ok()) {
      std::fprintf(stderr, "zeroshard-coordinator: persisting the job state: %s\n",
                   s.ToString().c_str());
    }
  }
  if (last_step) {
    if (absl::Status s = durable.SetLastStep(last_step->step, last_step->loss); !s.ok()) {
      std::fprintf(stderr, "zeroshard-coordinator: persisting the step: %s\n",
                   s.ToString().c_str());
    }
  }
  for (const std::string& line : log)
    std::fprintf(stderr, "zeroshard-coordinator: %s\n", line.c_str());
}

}  // namespace zeroshard::server
