// This machine's host name (gethostname(2)), or "" when it cannot be read.
// Header-only, so the comm layer can use it without linking common's
// library.
//
// Thread safety: any thread.
#pragma once

#include <unistd.h>

#include <string>

namespace zeroshard {

inline std::string HostName() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) return std::string();
  return host;
}

}  // namespace zeroshard
