#include "worker/trainer/step_reporter.h"

#include <algorithm>
#include <utility>

namespace zeroshard {

StepReporter::StepReporter(Send send, int capacity, absl::Duration flush_timeout)
    : send_(std::move(send)),
      capacity_(static_cast<size_t>(std::max(capacity, 1))),
      flush_timeout_(flush_timeout),
      thread_([this] { Loop(); }) {}

StepReporter::~StepReporter() {
  Flush(flush_timeout_);
  {
    absl::MutexLock lock(&mu_);
    dropped_ += static_cast<int64_t>(queue_.size());
    queue_.clear();
    stop_ = true;
  }
  thread_.join();  // A send in progress ends by its own RPC deadline.
}

void StepReporter::Submit(v1::StepReport report) {
  absl::MutexLock lock(&mu_);
  if (queue_.size() >= capacity_) {
    queue_.pop_front();
    ++dropped_;
  }
  queue_.push_back(std::move(report));
}

bool StepReporter::Flush(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return queue_.empty() && !sending_; };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

void StepReporter::Loop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
    mu_.Await(absl::Condition(&ready));
    if (stop_) return;
    v1::StepReport report = std::move(queue_.front());
    queue_.pop_front();
    sending_ = true;
    mu_.Unlock();
    const absl::Status status = send_(report);
    mu_.Lock();
    sending_ = false;
    ++(status.ok() ? sent_ : failed_);
  }
}

int64_t StepReporter::sent() const {
  absl::MutexLock lock(&mu_);
  return sent_;
}

int64_t StepReporter::failed() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

int64_t StepReporter::dropped() const {
  absl::MutexLock lock(&mu_);
  return dropped_;
}

}  // namespace zeroshard
