#include "common/infra/process_setup.h"

#include <pthread.h>
#include <sys/resource.h>

#include "absl/synchronization/mutex.h"
#include "common/infra/crash_report.h"

namespace zeroshard {

void SetUpProcess(const char* argv0) {
  InstallCrashReport(argv0);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Every connection, stream and file takes a descriptor; a soft limit of
  // 1,024 would let idle connections starve the server of new ones.
  struct rlimit files {};
  if (::getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &files);  // Best effort: the old limit still works.
  }
}

sigset_t BlockStopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  return stop_signals;
}

}  // namespace zeroshard
