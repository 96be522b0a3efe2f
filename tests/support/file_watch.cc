#include "tests/support/file_watch.h"

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/time/clock.h"

namespace zeroshard::testing {
namespace {

bool PollEvery20Ms(const std::function<bool()>& done, absl::Time deadline) {
  while (!done()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

}  // namespace

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool WaitForFiles(const std::string& dir, const std::function<bool()>& done, absl::Duration timeout,
                  absl::Duration recheck) {
  const absl::Time deadline = absl::Now() + timeout;
  const int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd < 0 || inotify_add_watch(fd, dir.c_str(),
                                  IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO) < 0) {
    if (fd >= 0) close(fd);
    std::fprintf(stderr, "WaitForFiles: no inotify watch on %s: checking every 20 ms\n",
                 dir.c_str());
    return PollEvery20Ms(done, deadline);
  }
  bool held = done();  // After the watch is set: no change is missed between.
  char events[4096];
  while (!held) {
    const absl::Duration left = std::min(deadline - absl::Now(), recheck);
    if (left <= absl::ZeroDuration() && absl::Now() >= deadline) break;
    pollfd p{fd, POLLIN, 0};
    const int64_t ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(left) + 1);
    if (poll(&p, 1, static_cast<int>(std::min<int64_t>(ms, 1 << 30))) > 0) {
      while (read(fd, events, sizeof(events)) > 0) {
      }
    }
    held = done();
  }
  close(fd);
  return held;
}

}  // namespace zeroshard::testing
