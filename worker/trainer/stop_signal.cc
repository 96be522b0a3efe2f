#include "worker/trainer/stop_signal.h"

#include <signal.h>
#include <unistd.h>

namespace zeroshard {
namespace {

// The only process-wide stop flag: the signal handler needs a place it can
// reach. Everything else reads it through the token main passes on.
StopSource g_signal_stop;

// Only async-signal-safe calls here: a lock-free atomic, write(2) and _exit(2).
void OnStopSignal(int sig) {
  if (g_signal_stop.RequestStop()) {
    constexpr char kAgain[] = "zeroshard-worker: second stop signal: exiting now\n";
    (void)!write(STDERR_FILENO, kAgain, sizeof(kAgain) - 1);
    _exit(128 + sig);
  }
  constexpr char kFirst[] =
      "zeroshard-worker: stop signal: leaving the job at the next step boundary "
      "(send it again to exit at once)\n";
  (void)!write(STDERR_FILENO, kFirst, sizeof(kFirst) - 1);
}

}  // namespace

void InstallStopSignalHandlers() {
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

StopToken SignalStopToken() { return g_signal_stop.token(); }

}  // namespace zeroshard
