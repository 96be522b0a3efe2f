#include "server/checkpoint/local_read_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/formats/read_only_file.h"
#include "common/rpc/fd_frames.h"
#include "common/status_macros.h"

namespace zeroshard::server {
namespace {

absl::Status Errno(absl::string_view what, absl::string_view path) {
  return absl::InternalError(
      absl::StrCat("local reads: ", what, " ", path, ": ", std::strerror(errno)));
}

void SetTimeout(int fd, int option, absl::Duration d) {
  const timeval tv = absl::ToTimeval(d);
  (void)::setsockopt(fd, SOL_SOCKET, option, &tv, sizeof(tv));
}

// The peer runs as this process's user (or the peer is root).
bool SameUser(int fd) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return false;
  return cred.uid == ::geteuid() || cred.uid == 0;
}

void SendError(int sock, const absl::Status& status, uint64_t request_id = 0) {
  v1::LocalReadReply reply;
  reply.set_request_id(request_id);
  reply.set_code(static_cast<int>(status.code()));
  reply.set_message(std::string(status.message()));
  (void)SendFrame(sock, reply.SerializeAsString());
}

// A socket bound and listening at `name` (fd_frames.h's UnixAddress).
absl::StatusOr<int> Listen(const std::string& name) {
  ZS_ASSIGN_OR_RETURN(const UnixAddress addr, MakeUnixAddress(name));
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket for", name);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr.addr), addr.size) != 0 ||
      ::listen(fd, 64) != 0) {
    absl::Status st = Errno("bind/listen", name);
    ::close(fd);
    return st;
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalReadServer>> LocalReadServer::Start(CheckpointStore* store,
                                                                        Authorize authorize) {
  // Abstract: no file to leave behind if the process is killed. The random
  // part keeps coordinators (and restarts of one) apart.
  const std::string name = absl::StrFormat("@zeroshard-reads-%d-%016x", ::getpid(),
                                           absl::Uniform<uint64_t>(absl::BitGen()));
  ZS_ASSIGN_OR_RETURN(const int fd, Listen(name));
  std::unique_ptr<LocalReadServer> server(
      new LocalReadServer(store, std::move(authorize), name, fd));
  server->acceptor_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

LocalReadServer::LocalReadServer(CheckpointStore* store, Authorize authorize, std::string name,
                                 int listen_fd)
    : store_(store),
      authorize_(std::move(authorize)),
      socket_path_(std::move(name)),
      listen_fd_(listen_fd) {}

LocalReadServer::~LocalReadServer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);  // Wakes accept (EINVAL).
    for (Connection& c : connections_) ::shutdown(c.fd, SHUT_RDWR);
  }
  if (acceptor_.joinable()) acceptor_.join();
  absl::MutexLock lock(&mu_);
  for (Connection& c : connections_) {
    c.thread.join();
    ::close(c.fd);
  }
  connections_.clear();
  ::close(listen_fd_);
}

void LocalReadServer::AcceptLoop() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    const int err = errno;
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      if (fd >= 0) ::close(fd);
      return;
    }
    if (fd < 0) {
      // Out of descriptors or memory: wait a little for some to close.
      if (err != EINTR && err != ECONNABORTED) {
        mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(10));
      }
      continue;
    }
    ReapDone();
    if (static_cast<int>(connections_.size()) >= kMaxConnections) {
      SendError(fd, absl::ResourceExhaustedError(absl::StrCat("local reads: ", kMaxConnections,
                                                              " connections are open already")));
      ::close(fd);
      continue;
    }
    Connection& c = connections_.emplace_back();
    c.fd = fd;
    try {
      c.thread = std::thread([this, &c] { Serve(&c); });
    } catch (const std::system_error& e) {  // Out of threads: refuse, never die.
      connections_.pop_back();
      SendError(fd, absl::ResourceExhaustedError(
                        absl::StrCat("local reads: no thread for the connection: ", e.what())));
      ::close(fd);
    }
  }
}

void LocalReadServer::ReapDone() {
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (!it->done.load()) {
      ++it;
      continue;
    }
    it->thread.join();
    ::close(it->fd);
    it = connections_.erase(it);
  }
}

void LocalReadServer::Serve(Connection* conn) {
  const int sock = conn->fd;
  if (!SameUser(sock)) {
    SendError(sock, absl::PermissionDeniedError(
                        "local reads: the peer runs as another user than the coordinator"));
  } else {
    SetTimeout(sock, SO_RCVTIMEO, kIdleTimeout);
    SetTimeout(sock, SO_SNDTIMEO, absl::Seconds(10));
    for (;;) {
      absl::StatusOr<ReceivedFrame> frame = ReceiveFrame(sock, kMaxRequestBytes);
      if (!frame.ok()) {
        if (absl::IsInvalidArgument(frame.status())) SendError(sock, frame.status());
        break;  // Closed, idle too long, or a frame too large: the stream is lost.
      }
      Answer(sock, frame->bytes());
    }
  }
  conn->done.store(true);
}

void LocalReadServer::Answer(int sock, const std::string& request) {
  v1::LocalReadRequest req;
  if (!req.ParseFromString(request)) {
    return SendError(sock, absl::InvalidArgumentError("local reads: the request did not parse"));
  }
  if (absl::Status st = authorize_(req.token()); !st.ok()) {
    return SendError(sock, st, req.request_id());
  }
  if (req.file().model_weights()) return AnswerModelWeights(sock, req);
  absl::StatusOr<CheckpointStore::OpenedFile> opened = store_->OpenForLocalRead(req.file());
  if (!opened.ok()) return SendError(sock, opened.status(), req.request_id());
  v1::LocalReadReply reply;
  reply.set_request_id(req.request_id());
  reply.set_step(opened->step);
  *reply.mutable_file() = std::move(opened->file);
  // The buffered descriptor only: see local_reads.h on why ranks read
  // through the page cache. A lost peer ends at its next read.
  const int fd = opened->in.fd();
  (void)SendFrame(sock, reply.SerializeAsString(), {&fd, 1});
}

void LocalReadServer::AnswerModelWeights(int sock, const v1::LocalReadRequest& req) {
  absl::StatusOr<CheckpointStore::ModelWeightsPart> part =
      store_->OpenModelWeightsForLocalRead(req);
  if (!part.ok()) return SendError(sock, part.status(), req.request_id());
  v1::LocalReadReply reply;
  reply.set_request_id(req.request_id());
  *reply.mutable_model() = std::move(part->model);
  if (part->fd < 0) {
    (void)SendFrame(sock, reply.SerializeAsString());
    return;
  }
  // A description of the rank's own, not the coordinator's: what the rank
  // does to it (fcntl flags, fadvise, readahead) stays off this process's
  // reads (checkpoint files are opened afresh for each request anyway).
  const int own = ReopenReadOnly(part->fd);
  if (own < 0) {
    return SendError(sock, Errno("reopen", part->weights->files()[req.model_file() - 1]),
                     req.request_id());
  }
  (void)SendFrame(sock, reply.SerializeAsString(), {&own, 1});
  ::close(own);
}

}  // namespace zeroshard::server
