#include "common/process_setup.h"

#include "absl/synchronization/mutex.h"

namespace zeroshard {

void SetUpProcess() { absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore); }

}  // namespace zeroshard
