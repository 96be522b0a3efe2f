#include "common/infra/secret_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zeroshard {

absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  // The mode of the file that is read (fstat on the open descriptor), not
  // of whatever the path names a moment earlier.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  struct stat st {};
  const bool stated = ::fstat(fd, &st) == 0;
  const unsigned mode = st.st_mode & 07777;
  if (!stated || (mode & (S_IRWXO | S_IWGRP)) != 0) {
    ::close(fd);
    if (!stated) return absl::InternalError(absl::StrCat(path, ": fstat failed"));
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s is open to other users (mode %04o): it holds secrets; chmod 600 it (640 for a "
        "group that must read it)",
        path, mode));
  }
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return absl::InternalError(absl::StrCat(path, ": read failed"));
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace zeroshard
