#include "common/tokenizer/sentencepiece_protocol.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace zeroshard::tokenizer::spm_protocol {

bool ReadFull(int fd, void* buf, size_t n) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool WriteFull(int fd, const void* buf, size_t n) {
  const auto* p = static_cast<const char*>(buf);
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool WriteFrame(int fd, char tag, const std::string& payload) {
  char head[5];
  head[0] = tag;
  const auto len = static_cast<uint32_t>(payload.size());
  std::memcpy(head + 1, &len, 4);
  return WriteFull(fd, head, 5) && WriteFull(fd, payload.data(), payload.size());
}

bool ReadFrame(int fd, char* tag, std::string* payload) {
  char head[5];
  if (!ReadFull(fd, head, 5)) return false;
  *tag = head[0];
  uint32_t len = 0;
  std::memcpy(&len, head + 1, 4);
  payload->resize(len);
  return ReadFull(fd, payload->data(), len);
}

}  // namespace zeroshard::tokenizer::spm_protocol
