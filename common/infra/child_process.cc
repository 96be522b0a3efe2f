#include "common/infra/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "absl/time/clock.h"

namespace zeroshard {

ChildProcess::ChildProcess(std::vector<std::string> argv, const std::string& log_path,
                           const std::vector<std::string>& extra_env) {
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  std::vector<std::string> env_copy = extra_env;
  pid_ = fork();
  if (pid_ != 0) return;
  // Child: only async-signal-safe calls from here on. It dies with its
  // parent, so a crashed or killed launcher leaves nothing running.
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
  }
  const int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
  for (std::string& e : env_copy) putenv(e.data());
  execv(args[0], args.data());
  _exit(127);
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    Wait(absl::Seconds(10));
  }
}

void ChildProcess::Signal(int sig) {
  if (pid_ > 0 && !reaped_) kill(pid_, sig);
}

bool ChildProcess::Running() {
  if (reaped_ || pid_ <= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    reaped_ = true;
    status_ = status;
    return false;
  }
  return true;
}

int ChildProcess::Wait(absl::Duration timeout) {
  if (pid_ <= 0) return -1;
  if (!reaped_) {
    if (!ReapBy(pid_, absl::Now() + timeout, &status_)) return -1;
    reaped_ = true;
  }
  if (WIFEXITED(status_)) return WEXITSTATUS(status_);
  if (WIFSIGNALED(status_)) return 128 + WTERMSIG(status_);
  return -1;
}

std::optional<bool> AwaitExit(pid_t pid, absl::Time deadline) {
  // pidfd_open(2), through syscall(2): glibc 2.36 declares it without C linkage.
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));  // Readable on exit.
  if (pidfd < 0) {
    if (errno == ESRCH) return true;
    return std::nullopt;
  }
  pollfd exited{pidfd, POLLIN, 0};
  const int64_t ms =
      std::clamp<int64_t>(absl::ToInt64Milliseconds(deadline - absl::Now()) + 1, 0, 1 << 30);
  const bool ended = poll(&exited, 1, static_cast<int>(ms)) == 1;
  close(pidfd);
  return ended;
}

bool ReapBy(pid_t pid, absl::Time deadline, int* status) {
  pid_t reaped = 0;
  while ((reaped = waitpid(pid, status, WNOHANG)) == 0 && absl::Now() < deadline) {
    // Where the kernel has no pidfd, checked every 5 ms.
    if (!AwaitExit(pid, deadline).has_value()) absl::SleepFor(absl::Milliseconds(5));
  }
  return reaped == pid;
}

int ChildProcess::Stop(absl::Duration grace) {
  Signal(SIGTERM);
  int code = Wait(grace);
  if (code == -1 && Running()) {
    Signal(SIGKILL);
    code = Wait(absl::Seconds(10));
  }
  return code;
}

}  // namespace zeroshard
