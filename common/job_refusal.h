// A job this process cannot run as it is configured: its model state does
// not fit the memory here, its offload dir lacks room, and the like. Such a
// failure is not helped by a restart, so the worker exits 2 (as for a
// command-line error; the Kubernetes Job's podFailurePolicy fails the Job on
// it instead of retrying) and `zeroshard launch` exits 2 after it.
//
// The mark is a payload on the absl::Status, so the status keeps its code
// and message through ZS_RETURN_IF_ERROR. Thread-safe: pure functions.
#pragma once

#include "absl/status/status.h"

namespace zeroshard {

// `status` with the refusal mark (an OK status is returned unchanged).
absl::Status AsJobRefusal(absl::Status status);

// True when `status` carries the mark.
bool IsJobRefusal(const absl::Status& status);

}  // namespace zeroshard
