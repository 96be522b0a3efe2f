// StepReporter: sends a rank's step reports to the coordinator from a thread
// of its own, so a slow coordinator (its state file's fsync for every new
// step, a busy server, a retrying channel) never holds up a training step.
//
// Reports are sent one at a time, in the order submitted (the coordinator
// keeps the highest step, so order matters only for its throughput
// figures). At most `capacity` wait; a full queue drops the oldest waiting
// report, so the newest (the job's last step, which completes the job) is
// never the one lost. A failed send is counted and forgotten: a report is
// a metrics sample, never training state.
//
// Thread safety: Submit, Flush, sent, dropped and failed may be called from
// any thread; the send function runs on the reporter's thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "zeroshard/v1/coordinator.pb.h"

namespace zeroshard {

class StepReporter {
 public:
  using Send = std::function<absl::Status(const v1::StepReport&)>;
  // `capacity` >= 1 (smaller is treated as 1). `flush_timeout`: how long
  // the destructor waits for queued reports before it gives them up.
  StepReporter(Send send, int capacity, absl::Duration flush_timeout);
  // Flushes (bounded by flush_timeout), then stops the thread; reports
  // still waiting are dropped.
  ~StepReporter();
  StepReporter(const StepReporter&) = delete;
  StepReporter& operator=(const StepReporter&) = delete;

  // Queues `report` and returns at once.
  void Submit(v1::StepReport report);
  // Waits until every report submitted so far has been sent (or failed);
  // false when `timeout` passed first (the rest still go in the background).
  bool Flush(absl::Duration timeout);

  int64_t sent() const;     // Sends that returned OK.
  int64_t failed() const;   // Sends that returned an error.
  int64_t dropped() const;  // Reports dropped from a full queue.

 private:
  void Loop();

  const Send send_;
  const size_t capacity_;
  const absl::Duration flush_timeout_;
  mutable absl::Mutex mu_;
  std::deque<v1::StepReport> queue_ ABSL_GUARDED_BY(mu_);
  bool sending_ ABSL_GUARDED_BY(mu_) = false;  // One is in send_ now.
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t sent_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;  // Last: started once the state above exists.
};

}  // namespace zeroshard
