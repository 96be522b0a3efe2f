// Length-prefixed messages with file descriptors attached, over a connected
// Unix stream socket (unix(7): SCM_RIGHTS). Local reads use them: a
// coordinator hands a rank on its own host the descriptors of a checkpoint
// file (server/checkpoint/local_read_server.h).
//
// A frame is a 4-byte little-endian length, then that many bytes; up to
// kMaxFrameFds descriptors travel with its first byte. Received descriptors
// are opened close-on-exec and owned by the ReceivedFrame until taken.
//
// Errors: UNAVAILABLE when the peer closed or the socket failed (naming the
// errno), DEADLINE_EXCEEDED when a socket timeout (SO_RCVTIMEO/SO_SNDTIMEO)
// ran out, INVALID_ARGUMENT for a frame over the caller's limit, DATA_LOSS
// for descriptors cut off (MSG_CTRUNC) or more than kMaxFrameFds.
// Thread safety: one sender and one receiver per socket at a time.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace zeroshard {

inline constexpr int kMaxFrameFds = 4;

// The address of a Unix stream socket: a file system path, or "@name" for
// a name in Linux's abstract namespace (unix(7)), which needs no file and
// vanishes with its socket. INVALID_ARGUMENT for "" or a name too long.
struct UnixAddress {
  sockaddr_un addr{};
  socklen_t size = 0;
};
absl::StatusOr<UnixAddress> MakeUnixAddress(absl::string_view name);

// Sends `bytes` as one frame, with duplicates of `fds` (the caller keeps
// its own). INVALID_ARGUMENT for more than kMaxFrameFds or over 4 GiB.
absl::Status SendFrame(int sock, absl::string_view bytes, absl::Span<const int> fds = {});

class ReceivedFrame {
 public:
  ReceivedFrame() = default;
  ReceivedFrame(ReceivedFrame&& other) noexcept;
  ReceivedFrame& operator=(ReceivedFrame&& other) noexcept;
  ~ReceivedFrame();  // Closes the descriptors not taken.

  const std::string& bytes() const { return bytes_; }
  size_t fd_count() const { return fds_.size(); }
  // Descriptor i, now the caller's; -1 if taken before or out of range.
  int TakeFd(size_t i);

 private:
  friend absl::StatusOr<ReceivedFrame> ReceiveFrame(int sock, size_t max_bytes);
  void CloseAll();
  std::string bytes_;
  std::vector<int> fds_;
};

// The next frame; INVALID_ARGUMENT (and the socket no longer usable) for
// one longer than `max_bytes`.
absl::StatusOr<ReceivedFrame> ReceiveFrame(int sock, size_t max_bytes);

}  // namespace zeroshard
