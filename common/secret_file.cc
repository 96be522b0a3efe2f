#include "common/secret_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/atomic_file.h"

namespace zeroshard {

absl::StatusOr<std::string> ReadSecretFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  const unsigned mode = st.st_mode & 07777;
  if ((mode & (S_IRWXO | S_IWGRP)) != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s is open to other users (mode %04o): it holds secrets; chmod 600 it (640 for a "
        "group that must read it)",
        path, mode));
  }
  return ReadWholeFile(path);
}

}  // namespace zeroshard
