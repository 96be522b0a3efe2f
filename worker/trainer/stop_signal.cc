#include "worker/trainer/stop_signal.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>

namespace zeroshard {
namespace {

// Lock-free, so reading and writing it from a handler is safe.
std::atomic<bool> g_stop_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free);

// Only async-signal-safe calls here: write(2) and _exit(2).
void OnStopSignal(int sig) {
  if (g_stop_requested.exchange(true)) {
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

bool StopRequested() { return g_stop_requested.load(std::memory_order_relaxed); }

void RequestStop() { g_stop_requested.store(true); }

}  // namespace zeroshard
