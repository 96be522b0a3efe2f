#include "worker/offload/io_queue.h"

#include "absl/strings/str_cat.h"

namespace zeroshard {

IoQueue::IoQueue(bool force_pread) : thread_([this, force_pread] { Run(force_pread); }) {}

IoQueue::~IoQueue() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

IoQueue::Ticket IoQueue::Submit(bool write, BlockFile* file, void* buf, int64_t bytes,
                                int64_t offset) {
  absl::MutexLock lock(&mu_);
  const Ticket t = next_++;
  jobs_.push_back({t, write, file, buf, bytes, offset});
  return t;
}

absl::Status IoQueue::Wait(Ticket ticket, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto done = [this, ticket]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return done_ >= ticket; };
  if (!mu_.AwaitWithTimeout(absl::Condition(&done), timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("offload I/O not done after ", absl::FormatDuration(timeout)));
  }
  return first_error_;
}

bool IoQueue::uses_uring() const {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](const int* u) { return *u >= 0; }, &uring_));
  return uring_ == 1;
}

void IoQueue::Run(bool force_pread) {
  IoRing ring(force_pread);
  {
    absl::MutexLock lock(&mu_);
    uring_ = ring.uses_uring() ? 1 : 0;
  }
  for (;;) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ || !jobs_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (jobs_.empty()) return;  // stop_ and nothing left.
      job = jobs_.front();
      jobs_.pop_front();
    }
    absl::Status s = job.write ? job.file->Write(ring, job.buf, job.bytes, job.offset)
                               : job.file->Read(ring, job.buf, job.bytes, job.offset);
    absl::MutexLock lock(&mu_);
    if (first_error_.ok() && !s.ok()) first_error_ = s;
    done_ = job.ticket;
  }
}

}  // namespace zeroshard
