#include "common/infra/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace zeroshard {

absl::StatusOr<std::unique_ptr<DirLock>> DirLock::Acquire(const std::string& dir,
                                                          const std::string& name) {
  const std::string path = dir + "/" + name;
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("open ", path, ": ", std::strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    close(fd);
    if (err == EWOULDBLOCK) {
      return absl::FailedPreconditionError(
          absl::StrCat(dir, " is in use by another coordinator (", path, " is locked)"));
    }
    return absl::UnavailableError(absl::StrCat("lock ", path, ": ", std::strerror(err)));
  }
  return std::unique_ptr<DirLock>(new DirLock(fd));
}

DirLock::~DirLock() { close(fd_); }  // Closing releases the flock.

}  // namespace zeroshard
