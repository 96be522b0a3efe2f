// An exclusive advisory lock on a directory (flock on "<dir>/<name>"), held
// for the owner's lifetime, so two coordinators never share a state or
// checkpoint directory: the second would delete the first's pending uploads
// and overwrite its state. Released when the process exits, even on kill -9.
// Thread-compatible.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace zeroshard {

class DirLock {
 public:
  // FAILED_PRECONDITION naming the directory when another process (or
  // another DirLock in this one) holds it; the open error otherwise.
  // `name` is the lock file's name, one per kind of owner, so one directory
  // may serve as both state and checkpoint dir.
  static absl::StatusOr<std::unique_ptr<DirLock>> Acquire(const std::string& dir,
                                                          const std::string& name);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  explicit DirLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace zeroshard
