// IoQueue: one I/O thread running file transfers in submission order, so the
// training thread overlaps them with compute ("while unit u is updated, unit
// u+1 is read and u-1 written back"). The thread owns its IoRing
// (block_file.h). Submit returns a ticket; Wait blocks until that transfer
// (and every one submitted before it) finished, with a deadline.
//
// Errors: a transfer's own Status from Wait; DEADLINE_EXCEEDED when the
// deadline passes first (the transfer keeps running: the caller must not
// free its buffer, and ~IoQueue still joins it).
// Thread safety: Submit and Wait from one thread (the training thread).
#pragma once

#include <cstdint>
#include <deque>
#include <thread>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/offload/block_file.h"

namespace zeroshard {

class IoQueue {
 public:
  using Ticket = int64_t;  // 0 = nothing to wait for.
  explicit IoQueue(bool force_pread);
  ~IoQueue();  // Finishes queued transfers, then joins.
  IoQueue(const IoQueue&) = delete;
  IoQueue& operator=(const IoQueue&) = delete;

  // `file` and `buf` must stay valid until the ticket is waited.
  Ticket Submit(bool write, BlockFile* file, void* buf, int64_t bytes, int64_t offset);
  absl::Status Wait(Ticket ticket, absl::Duration timeout);
  bool uses_uring() const;

 private:
  struct Job {
    Ticket ticket;
    bool write;
    BlockFile* file;
    void* buf;
    int64_t bytes, offset;
  };
  void Run(bool force_pread);

  mutable absl::Mutex mu_;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  Ticket next_ ABSL_GUARDED_BY(mu_) = 1;
  Ticket done_ ABSL_GUARDED_BY(mu_) = 0;  // Every ticket <= done_ finished.
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int uring_ ABSL_GUARDED_BY(mu_) = -1;  // -1 unknown yet, 0 no, 1 yes.
  std::thread thread_;
};

}  // namespace zeroshard
