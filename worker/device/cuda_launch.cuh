// The launch check every kernel launcher uses (nvcc only; header-only, so
// the model's and the optimizer's .cu files include it too).
//
// [Note: launch checks] A kernel launch reports a bad configuration only
// through the thread's last error, which cudaGetLastError reads and clears.
// Other runtime calls leave their failures there as well: cudaEventQuery's
// cudaErrorNotReady on a busy event, a failed allocation that was retried,
// an attribute query whose result was ignored. Read after a launch, that
// value would blame the launch for an earlier, unrelated call. CheckedLaunch
// clears it first, so the error it returns is the launch's own. A sticky
// error (a kernel fault: the context is lost) survives the clear and is
// returned, which is right: every later launch fails with it.
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace zeroshard {

// Runs `launch` (kernel launches only, no other runtime call) and returns an
// error a launch in it raised (the last, where several did), or cudaSuccess. Thread-safe as the
// runtime is: the last error is per thread.
template <typename Launch>
inline cudaError_t CheckedLaunch(Launch&& launch) {
  (void)cudaGetLastError();  // An earlier call's leftover, not this launch's.
  std::forward<Launch>(launch)();
  return cudaGetLastError();
}

}  // namespace zeroshard
