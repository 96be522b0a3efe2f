#include "tests/support/file_watch.h"

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <vector>

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

enum class Armed { kDir, kAncestor, kFailed };

// Watches `dir` or, while it does not exist yet, its nearest existing
// ancestor and every level below that exists by the time it is tried, so
// a level created after its parent's watch was set is seen as an event.
Armed Arm(int fd, const std::string& dir) {
  constexpr uint32_t kChanges = IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO;
  std::vector<std::string> chain = {dir};  // dir, its parent, ..., the first that exists.
  while (inotify_add_watch(fd, chain.back().c_str(), kChanges) < 0) {
    const std::string up = DirOf(chain.back());
    if (errno != ENOENT || up == chain.back()) return Armed::kFailed;
    chain.push_back(up);
  }
  for (size_t level = chain.size() - 1; level > 0; --level) {
    if (inotify_add_watch(fd, chain[level - 1].c_str(), kChanges) < 0) return Armed::kAncestor;
  }
  return Armed::kDir;
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
  Armed armed = fd < 0 ? Armed::kFailed : Arm(fd, dir);
  if (armed == Armed::kFailed) {
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
    if (armed == Armed::kAncestor) armed = Arm(fd, dir);  // A level may have appeared.
    held = done();
  }
  close(fd);
  return held;
}

}  // namespace zeroshard::testing
