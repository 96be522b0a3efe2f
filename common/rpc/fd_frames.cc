#include "common/rpc/fd_frames.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace zeroshard {
namespace {

absl::Status SocketError(int err, absl::string_view what) {
  if (err == EAGAIN || err == EWOULDBLOCK) {
    return absl::DeadlineExceededError(absl::StrCat(what, ": the socket's timeout ran out"));
  }
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(err)));
}

// Sends [data, data + size) with send(2), retrying short sends and EINTR.
absl::Status SendAll(int sock, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(sock, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SocketError(errno, "send");
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Receives exactly `size` bytes, retrying short reads and EINTR.
absl::Status ReceiveAll(int sock, char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::recv(sock, data, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SocketError(errno, "recv");
    if (n == 0) return absl::UnavailableError("recv: the peer closed the connection");
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

union FdControl {  // Aligned room for kMaxFrameFds descriptors.
  char buf[CMSG_SPACE(sizeof(int) * kMaxFrameFds)];
  cmsghdr align;
};

}  // namespace

absl::StatusOr<UnixAddress> MakeUnixAddress(absl::string_view name) {
  UnixAddress a;
  a.addr.sun_family = AF_UNIX;
  const bool abstract = absl::StartsWith(name, "@");
  // A path needs room for its NUL; an abstract name has its leading NUL.
  if (name.empty() || name.size() >= sizeof(a.addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("Unix socket address \"", name,
                                                   "\" is empty or over ",
                                                   sizeof(a.addr.sun_path) - 1, " bytes"));
  }
  std::memcpy(a.addr.sun_path, name.data(), name.size());
  if (abstract) a.addr.sun_path[0] = '\0';
  a.size =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() + (abstract ? 0 : 1));
  return a;
}

absl::Status SendFrame(int sock, absl::string_view bytes, absl::Span<const int> fds) {
  if (fds.size() > static_cast<size_t>(kMaxFrameFds) || bytes.size() > UINT32_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("SendFrame: ", fds.size(), " descriptors and ",
                                                   bytes.size(), " bytes is too much"));
  }
  unsigned char header[4];
  const auto size = static_cast<uint32_t>(bytes.size());
  for (int i = 0; i < 4; ++i) header[i] = static_cast<unsigned char>(size >> (8 * i));
  // The header alone carries the descriptors; the body follows with send.
  iovec iov{header, sizeof(header)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  FdControl control{};
  if (!fds.empty()) {
    msg.msg_control = control.buf;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t n;
  do {
    n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return SocketError(errno, "sendmsg");
  ZS_RETURN_IF_ERROR(SendAll(sock, reinterpret_cast<const char*>(header) + n, sizeof(header) - n));
  return SendAll(sock, bytes.data(), bytes.size());
}

absl::StatusOr<ReceivedFrame> ReceiveFrame(int sock, size_t max_bytes) {
  ReceivedFrame frame;
  unsigned char header[4];
  iovec iov{header, sizeof(header)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  FdControl control{};
  msg.msg_control = control.buf;
  msg.msg_controllen = sizeof(control.buf);
  ssize_t n;
  do {
    n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return SocketError(errno, "recvmsg");
  if (n == 0) return absl::UnavailableError("recvmsg: the peer closed the connection");
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      frame.fds_.push_back(fd);  // Owned (closed with the frame) at once.
    }
  }
  if ((msg.msg_flags & MSG_CTRUNC) != 0) {
    return absl::DataLossError("recvmsg: descriptors were cut off (more than the frame allows)");
  }
  ZS_RETURN_IF_ERROR(ReceiveAll(sock, reinterpret_cast<char*>(header) + n, sizeof(header) - n));
  uint32_t size = 0;
  for (int i = 0; i < 4; ++i) size |= static_cast<uint32_t>(header[i]) << (8 * i);
  if (size > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("a frame of ", size, " bytes is over the limit of ", max_bytes));
  }
  frame.bytes_.resize(size);
  ZS_RETURN_IF_ERROR(ReceiveAll(sock, frame.bytes_.data(), size));
  return frame;
}

ReceivedFrame::ReceivedFrame(ReceivedFrame&& other) noexcept
    : bytes_(std::move(other.bytes_)), fds_(std::exchange(other.fds_, {})) {}

ReceivedFrame& ReceivedFrame::operator=(ReceivedFrame&& other) noexcept {
  CloseAll();
  bytes_ = std::move(other.bytes_);
  fds_ = std::exchange(other.fds_, {});
  return *this;
}

ReceivedFrame::~ReceivedFrame() { CloseAll(); }

int ReceivedFrame::TakeFd(size_t i) { return i < fds_.size() ? std::exchange(fds_[i], -1) : -1; }

void ReceivedFrame::CloseAll() {
  for (int fd : fds_) {
    if (fd >= 0) ::close(fd);
  }
  fds_.clear();
}

}  // namespace zeroshard
