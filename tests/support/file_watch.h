// Waiting on files another process writes, on the kernel's inotify events
// instead of sleeps: the condition is checked at once, then after each
// change in the watched directory (a file created, written, closed or
// moved in), until it holds or the timeout passes. A directory that does
// not exist yet is waited for on its nearest existing ancestor's events.
// Where inotify cannot be had (no inotify instance, the watch limit
// reached) it checks every 20 ms instead, and says so once on stderr.
//
// Thread safety: each call has its own inotify instance.
#pragma once

#include <functional>
#include <string>

#include "absl/time/time.h"

namespace zeroshard::testing {

// Whether `done` held within `timeout`. `recheck` bounds each wait for an
// event (for conditions that change without a file event, such as a child
// process's exit).
bool WaitForFiles(const std::string& dir, const std::function<bool()>& done, absl::Duration timeout,
                  absl::Duration recheck = absl::InfiniteDuration());

// The directory part of `path` ("." for a bare name).
std::string DirOf(const std::string& path);

}  // namespace zeroshard::testing
