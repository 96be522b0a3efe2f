#include "common/formats/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace zeroshard {
namespace {

absl::Status ErrnoStatus(int err, const std::string& what, const std::string& path) {
  return absl::ErrnoToStatus(err, absl::StrCat(what, "(", path, ")"));
}

// Writes all `bytes` at `data`, retrying on EINTR and short writes.
absl::Status WriteAll(int fd, const void* data, size_t bytes, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::write(fd, p + done, bytes - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "write", path);
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status FsyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open", dir);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return ErrnoStatus(err, "fsync", dir);
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  return WriteFileAtomicallyStreamed(
      path, [&](const AppendFn& append) { return append(contents.data(), contents.size()); });
}

absl::Status WriteFileAtomicallyStreamed(const std::string& path,
                                         const std::function<absl::Status(const AppendFn&)>& write,
                                         unsigned mode) {
  if (path.empty()) return absl::InvalidArgumentError("path is empty");
  const std::filesystem::path target(path);
  const std::string dir =
      target.has_parent_path() ? target.parent_path().string() : std::string(".");
  // A unique temporary name in the same directory, so rename stays on one
  // file system; mkstemp avoids collisions between concurrent writers.
  std::string tmp = absl::StrCat(path, ".tmp.XXXXXX");
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "mkostemp", tmp);
  absl::Status status =
      ::fchmod(fd, static_cast<mode_t>(mode)) == 0
          ? write([&](const void* data, size_t bytes) { return WriteAll(fd, data, bytes, tmp); })
          : ErrnoStatus(errno, "fchmod", tmp);
  if (status.ok() && ::fsync(fd) != 0) status = ErrnoStatus(errno, "fsync", tmp);
  if (::close(fd) != 0 && status.ok()) status = ErrnoStatus(errno, "close", tmp);
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = ErrnoStatus(errno, "rename", absl::StrCat(tmp, " -> ", path));
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  return FsyncDirectory(dir);
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open", path);
  std::string out;
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return ErrnoStatus(err, "read", path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

absl::Status MakeDirectories(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("directory path is empty");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return ErrnoStatus(ec.value(), "create_directories", dir);
  return absl::OkStatus();
}

}  // namespace zeroshard

namespace zeroshard {

void RemoveStaleTemporaries(const std::string& path) {
  const std::filesystem::path target(path);
  const std::string prefix = target.filename().string() + ".tmp.";
  std::error_code ec;
  const std::filesystem::path dir =
      target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && e.is_regular_file(ec)) std::filesystem::remove(e.path(), ec);
  }
}

}  // namespace zeroshard
