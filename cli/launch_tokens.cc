#include "cli/launch_tokens.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace zeroshard::cli {
namespace {

absl::StatusOr<std::string> RandomToken() {
  char bytes[16];
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  const bool ok = fd >= 0 && ::read(fd, bytes, sizeof(bytes)) == sizeof(bytes);
  if (fd >= 0) ::close(fd);
  if (!ok) return absl::UnavailableError("/dev/urandom: cannot read 16 bytes");
  return absl::BytesToHexString(absl::string_view(bytes, sizeof(bytes)));
}

// `text` into `path`, created 0600 (an old file is removed first, so no
// wider mode it had carries over).
absl::Status WritePrivate(const std::string& path, const std::string& text) {
  ::unlink(path.c_str());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return absl::InternalError(absl::StrCat(path, ": ", std::strerror(errno)));
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!ok) return absl::InternalError(absl::StrCat(path, ": short write"));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LocalTokens> WriteLocalTokens(const std::string& run_dir) {
  ZS_ASSIGN_OR_RETURN(const std::string worker, RandomToken());
  ZS_ASSIGN_OR_RETURN(const std::string admin, RandomToken());
  LocalTokens t{run_dir + "/tokens", run_dir + "/worker-token", run_dir + "/admin-token"};
  ZS_RETURN_IF_ERROR(
      WritePrivate(t.coordinator_file, absl::StrCat("worker ", worker, "\nadmin ", admin, "\n")));
  ZS_RETURN_IF_ERROR(WritePrivate(t.worker_file, worker + "\n"));
  ZS_RETURN_IF_ERROR(WritePrivate(t.admin_file, admin + "\n"));
  return t;
}

}  // namespace zeroshard::cli
