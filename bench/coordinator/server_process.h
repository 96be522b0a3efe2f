// A coordinator in a child process, so the bench can read the CPU time the
// coordinator alone spends (its clients run in the parent). Fork before the
// parent has used gRPC or started threads (gRPC does not survive a fork).
//
// Thread safety: one owner; CpuSeconds() from any thread.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/rpc/coordinator_server.h"

namespace zeroshard::bench {

class ServerProcess {
 public:
  // The child starts CoordinatorServer with `options` and serves until
  // this is destroyed. UNAVAILABLE if it could not start (its error is on
  // stderr).
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Fork(const CoordinatorOptions& options);
  ~ServerProcess();  // Tells the child to shut down and reaps it.
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  const std::string& address() const { return address_; }
  // User + system CPU seconds the child has used so far (/proc/PID/stat).
  double CpuSeconds() const;

 private:
  ServerProcess(pid_t pid, int control_fd, std::string address)
      : pid_(pid), control_fd_(control_fd), address_(std::move(address)) {}
  pid_t pid_;
  int control_fd_;  // Its closing tells the child to stop.
  std::string address_;
};

}  // namespace zeroshard::bench
