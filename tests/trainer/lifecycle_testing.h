// Shared by the worker lifecycle tests: the statuses a kFailed event
// carries, by how Decide must read them, and the failure path's actions.
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "worker/trainer/coordinator_refusal.h"
#include "worker/trainer/lifecycle.h"

namespace zeroshard::lifecycle_testing {

using Actions = std::vector<LifecycleAction>;

inline absl::Status Lost() { return absl::UnavailableError("peer 1 vanished"); }
inline absl::Status Own() { return absl::FailedPreconditionError("checkpoint does not match"); }
inline absl::Status Refused() {
  return MarkCoordinatorRefusal(absl::PermissionDeniedError("unknown member"));
}

inline const Actions kFailureActions = {LifecycleAction::kTakePeerCopies,
                                        LifecycleAction::kReportFailure};
inline const Actions kFailureLeave = {LifecycleAction::kTakePeerCopies,
                                      LifecycleAction::kReportFailure, LifecycleAction::kLeave};

}  // namespace zeroshard::lifecycle_testing
