#include "bench/coordinator/server_process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "bench/support/proc_stat.h"

namespace zeroshard::bench {
namespace {

// The child: serve, report the port (0 on failure), wait for EOF, stop.
[[noreturn]] void Serve(const CoordinatorOptions& options, int port_fd, int control_fd) {
  auto server = CoordinatorServer::Start(options);
  int port = 0;
  if (server.ok()) {
    port = (*server)->port();
  } else {
    std::fprintf(stderr, "server process: %s\n", server.status().ToString().c_str());
  }
  (void)!write(port_fd, &port, sizeof(port));
  close(port_fd);
  char byte;
  while (port != 0 && read(control_fd, &byte, 1) > 0) {
  }
  if (server.ok()) (*server)->Shutdown();
  _exit(port != 0 ? 0 : 1);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Fork(
    const CoordinatorOptions& options) {
  int port_pipe[2], control_pipe[2];
  if (pipe(port_pipe) != 0 || pipe(control_pipe) != 0) {
    return absl::UnavailableError("server process: pipe failed");
  }
  const pid_t pid = fork();
  if (pid < 0) return absl::UnavailableError("server process: fork failed");
  if (pid == 0) {
    close(port_pipe[0]);
    close(control_pipe[1]);
    Serve(options, port_pipe[1], control_pipe[0]);
  }
  close(port_pipe[1]);
  close(control_pipe[0]);
  int port = 0;
  const bool got = read(port_pipe[0], &port, sizeof(port)) == sizeof(port);
  close(port_pipe[0]);
  auto process = std::unique_ptr<ServerProcess>(
      new ServerProcess(pid, control_pipe[1], absl::StrCat("127.0.0.1:", port)));
  if (!got || port == 0)
    return absl::UnavailableError("server process: the coordinator did not start");
  return process;
}

ServerProcess::~ServerProcess() {
  close(control_fd_);
  int status = 0;
  waitpid(pid_, &status, 0);
}

double ServerProcess::CpuSeconds() const { return ProcessCpuSeconds(pid_); }

}  // namespace zeroshard::bench
