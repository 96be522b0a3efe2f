// The worker process's stop request: SIGTERM or SIGINT (Kubernetes' pod
// deletion, Ctrl-C) asks the worker to leave the job gracefully. The
// handler only sets the process's StopSource (stop_token.h; one lock-free
// atomic, async-signal-safe); main hands SignalStopToken() to RunWorker,
// which passes the token on to whatever checks it (the step boundary, the
// generation wait, a join). A second signal ends the process at once
// (_exit(128 + signal)).
//
// Thread safety: SignalStopToken may be called from any thread;
// InstallStopSignalHandlers once, from main, before other threads.
#pragma once

#include "worker/trainer/stop_token.h"

namespace zeroshard {

// Installs the SIGTERM/SIGINT handlers (sigaction, SA_RESTART).
void InstallStopSignalHandlers();
// The token the handlers' source sets.
StopToken SignalStopToken();

}  // namespace zeroshard
