// Local reads: a rank on the coordinator's host reads its checkpoint ranges
// (and a job's model weights) from the files itself, with descriptors the
// coordinator hands it over a Unix socket, instead of receiving every byte
// through DownloadRange.
//
// Why: through gRPC on loopback each byte restored is read from the disk,
// hashed, copied into a socket, copied out of it and copied into place,
// across two processes. On the 2-core machine this project measures on that
// held a restore at ~1.8 GB/s against 3.3 GB/s of plain reads (bench/README,
// "Restore against this disk's read patterns"). A local read is one read
// into place and one hash of each block, in the rank's own threads.
//
// What stays the coordinator's: it finds the committed checkpoint and the
// file (CheckpointStore::OpenForLocalRead: the job, the step, the first-read
// checks), checks the caller, and opens the file read-only; the reply
// carries its buffered descriptor. The rank gets
// only descriptors of committed files, which never change, and verifies
// every block against the hash the commit recorded (hashed_read.h). A rank
// that finds a block changed falls back to DownloadRange, where the
// coordinator finds the same mismatch and drops the checkpoint.
//
// Who may connect: the socket has a random name in the abstract namespace
// (no file; it is gone when the process is, however it ends), so only
// processes in this network namespace reach it: on another host, or in
// another pod, a rank cannot and uses DownloadRange. A peer must run as
// this process's user or root (SO_PEERCRED), and each request's token must
// pass `authorize` (the stack asks for role worker, not DownloadRange's
// reader). A descriptor is not a read-only boundary against a process of
// the same user: it could reopen the file through /proc for writing, as it
// could open the file itself. So the local reads add no power over the
// files to such a process, and the token keeps readers-only clients out.
// Each descriptor sent is a fresh open file description, so nothing a rank
// does to it changes this process's own reads. Same-user processes can
// also hold connections open (up to kMaxConnections); like everything else
// such a process could do to the coordinator (signals, ptrace), that is
// outside what this guards. Ranks then fall back to DownloadRange.
//
// Protocol: checkpoint.proto LocalReadRequest / LocalReadReply, one reply
// per request, as fd_frames.h frames. A connection idle for kIdleTimeout is
// closed. Thread safety: Start and the destructor from one thread; the
// store must outlive the server.
#pragma once

#include <atomic>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/checkpoint/checkpoint_store.h"

namespace zeroshard::server {

class LocalReadServer {
 public:
  static constexpr absl::Duration kIdleTimeout = absl::Seconds(60);
  static constexpr int kMaxConnections = 256;
  static constexpr size_t kMaxRequestBytes = 64 << 10;
  // OK, or the error for a token (UNAUTHENTICATED / PERMISSION_DENIED).
  using Authorize = std::function<absl::Status(absl::string_view token)>;

  // Listens on "@zeroshard-reads-<pid>-<random>". INTERNAL naming it when
  // the socket cannot be made.
  static absl::StatusOr<std::unique_ptr<LocalReadServer>> Start(CheckpointStore* store,
                                                                Authorize authorize);
  // Stops accepting, closes every connection and joins the threads.
  ~LocalReadServer();

  // The socket's address for CheckpointInfo.local_read_socket ("@name":
  // abstract; fd_frames.h MakeUnixAddress).
  const std::string& socket_path() const { return socket_path_; }

 private:
  struct Connection {
    int fd;
    std::thread thread;
    std::atomic<bool> done{false};
  };
  LocalReadServer(CheckpointStore* store, Authorize authorize, std::string name, int listen_fd);
  void AcceptLoop();
  void Serve(Connection* conn);
  // The reply to one request frame, and the file whose descriptors go with it.
  void Answer(int sock, const std::string& request);
  // A model-weights request (LocalReadRequest.model_file): the tensors, or
  // one file's descriptor.
  void AnswerModelWeights(int sock, const v1::LocalReadRequest& req);
  void ReapDone() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  CheckpointStore* const store_;
  const Authorize authorize_;
  const std::string socket_path_;
  const int listen_fd_;
  std::thread acceptor_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::list<Connection> connections_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zeroshard::server
