// A child process started by fork+exec that its owner signals and reaps by
// PID within a deadline (used by `zeroshard launch` for local workers and by
// tests for servers). The child gets its own process group, stdin from
// /dev/null, stdout+stderr appended to a log file, and SIGKILL when the
// thread that started it exits (PR_SET_PDEATHSIG), so a launcher that crashes
// or is killed leaves nothing running.
// Thread-compatible: one owner thread per object.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace zeroshard {

class ChildProcess {
 public:
  // argv[0] is the program path. pid() < 0 if fork failed; an exec failure
  // shows as exit code 127.
  ChildProcess(std::vector<std::string> argv, const std::string& log_path,
               const std::vector<std::string>& extra_env = {});
  // SIGKILLs and reaps the child if it is still running.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  void Signal(int sig);
  // Waits up to `timeout` (ReapBy); returns the exit code, 128+signal if
  // killed by a signal, or -1 if still running at the deadline.
  int Wait(absl::Duration timeout);
  bool Running();
  // SIGTERM, wait up to `grace`, then SIGKILL; returns the exit status as Wait.
  int Stop(absl::Duration grace);

 private:
  pid_t pid_ = -1;
  int status_ = 0;
  bool reaped_ = false;
};

// Whether process `pid` (any process, not only a child) has ended by
// `deadline`, woken by the kernel when it does (pidfd_open(2)); a pid that
// names no process has ended. nullopt where the kernel has no pidfd_open.
std::optional<bool> AwaitExit(pid_t pid, absl::Time deadline);

// Reaps `pid`, a child of this process, by `deadline`, woken by the kernel
// when it exits (pidfd_open(2); where the kernel has none, checking every
// 5 ms). True with its wait status in *status; false if it still runs at
// the deadline, or is no child of this process.
bool ReapBy(pid_t pid, absl::Time deadline, int* status);

}  // namespace zeroshard
