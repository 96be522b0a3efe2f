// Removes directories on a background thread, so that a checkpoint commit
// whose retention retires an older checkpoint (hundreds of MB to unlink)
// does not wait for the file system to free it. The caller first renames
// the directory out of sight (e.g. under kPendingPrefix, which the store's
// next Open removes if a crash comes first); the reaper only deletes.
//
// Thread-safe. The destructor finishes the queued removals and joins.
#pragma once

#include <deque>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace zeroshard::server {

class DirReaper {
 public:
  DirReaper();
  ~DirReaper();
  DirReaper(const DirReaper&) = delete;
  DirReaper& operator=(const DirReaper&) = delete;

  // Queues `dir` for recursive removal; errors are ignored (the store's next
  // Open retries what is left).
  void Remove(std::string dir);

 private:
  void Run();

  absl::Mutex mu_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace zeroshard::server
