// FirstError: the error that several upload or download streams report
// first (checkpoint_client.cc, checkpoint_client_restore.cc).
#pragma once

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace zeroshard::checkpoint {

// The first error of several streams, in time: the root cause. A stream
// that finds the pending checkpoint already dropped reports only that it
// is gone (NOT_FOUND), and may finish before the stream whose error
// dropped it: that error replaces a NOT_FOUND. Thread-safe.
class FirstError {
 public:
  void Note(const absl::Status& st) {
    absl::MutexLock lock(&mu_);
    if (status_.ok() || (absl::IsNotFound(status_) && !st.ok() && !absl::IsNotFound(st))) {
      status_ = st;
    }
  }
  absl::Status Get() {
    absl::MutexLock lock(&mu_);
    return status_;
  }

 private:
  absl::Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zeroshard::checkpoint
