// Test helpers to run the project's binaries: one-shot commands, and child
// processes that a test starts, signals and reaps by PID within a deadline.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace zeroshard::testing {

// Absolute path of a built binary ($ZEROSHARD_BIN_DIR/name).
std::string BinPath(const std::string& name);

struct CommandResult {
  int exit_code = -1;  // -1 if killed by a signal.
  std::string output;  // stdout and stderr together.
};

// Runs `shell_command` through /bin/sh with stdin from /dev/null.
CommandResult RunCommand(const std::string& shell_command);

// A child process; killed (SIGKILL) and reaped on destruction if still alive.
class ChildProcess {
 public:
  // argv[0] is the program path. Output goes to `log_path` (appended).
  ChildProcess(std::vector<std::string> argv, const std::string& log_path);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  void Signal(int sig);
  // Waits up to `timeout` for exit; returns the exit code, 128+signal if
  // killed by a signal, or -1 on timeout.
  int Wait(absl::Duration timeout);
  bool Running();

 private:
  pid_t pid_ = -1;
  int status_ = -1;
  bool reaped_ = false;
};

// Reads a whole file; "" if missing.
std::string ReadFile(const std::string& path);
// A fresh empty directory under $TMPDIR (or /tmp).
std::string MakeTempDir(const std::string& prefix);

}  // namespace zeroshard::testing
