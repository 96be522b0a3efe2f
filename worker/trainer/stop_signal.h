// A worker's stop request: SIGTERM or SIGINT (Kubernetes' pod deletion,
// Ctrl-C) asks the worker to leave the job gracefully. The handler only sets
// an atomic flag (async-signal-safe); the trainer checks it at each step
// boundary and the generation wait polls it, then the worker sends Leave and
// exits 0. A second signal ends the process at once (_exit(128 + signal)).
//
// Thread safety: StopRequested and RequestStop may be called from any
// thread; InstallStopSignalHandlers once, from main, before other threads.
#pragma once

namespace zeroshard {

// Installs the SIGTERM/SIGINT handlers (sigaction, SA_RESTART).
void InstallStopSignalHandlers();
// Whether a stop was requested (by a signal or RequestStop).
bool StopRequested();
// Sets the flag as the first signal does (for tests and embedders).
void RequestStop();

}  // namespace zeroshard
