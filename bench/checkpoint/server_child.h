// checkpoint_bench_server (bench_service.h) started as a child of the bench,
// from the bench's own directory, and stopped by PID: the service runs in its
// own process with its own allocator, as the coordinator's does, while the
// bench's ranks are the workers' side.
//
// Thread safety: one owner; pid() and port() from any thread.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "common/infra/child_process.h"
#include "common/rpc/rpc_security.h"

namespace zeroshard::bench {

class ServerChild {
 public:
  // Serves a store in `dir` (plaintext when `tls` is empty); its output goes
  // to `log`. Exits this process with the reason if it is not serving
  // within 30 s.
  ServerChild(const std::string& dir, const TlsFiles& tls, const std::string& log);
  ~ServerChild();  // SIGTERM, then SIGKILL after 5 s.
  ServerChild(const ServerChild&) = delete;
  ServerChild& operator=(const ServerChild&) = delete;

  pid_t pid() const { return process_->pid(); }
  int port() const { return port_; }

 private:
  std::unique_ptr<ChildProcess> process_;
  int port_ = 0;
};

}  // namespace zeroshard::bench
