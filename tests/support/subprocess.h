// Test helpers to run the project's binaries: one-shot commands, and child
// processes that a test starts, signals and reaps by PID within a deadline.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/infra/child_process.h"

namespace zeroshard::testing {

// Absolute path of a built binary ($ZEROSHARD_BIN_DIR/name).
std::string BinPath(const std::string& name);

struct CommandResult {
  int exit_code = -1;  // -1 if killed by a signal.
  std::string output;  // stdout and stderr together.
};

// Runs `shell_command` through /bin/sh with stdin from /dev/null.
CommandResult RunCommand(const std::string& shell_command);

// Child processes a test starts and stops by PID (common/infra/child_process.h).
using ::zeroshard::ChildProcess;

// Polls `log` (a zeroshard-coordinator's output) every 20 ms for its
// "listening on 127.0.0.1:PORT (grpc)" line and returns that address; ""
// once `timeout` passes or, when `process` is given, once it has exited.
std::string WaitForGrpcAddress(const std::string& log, absl::Duration timeout,
                               ChildProcess* process = nullptr);

// Reads a whole file; "" if missing.
std::string ReadFile(const std::string& path);
// A fresh empty directory under $TMPDIR (or /tmp).
std::string MakeTempDir(const std::string& prefix);

}  // namespace zeroshard::testing
