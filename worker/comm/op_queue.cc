#include "worker/comm/op_queue.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace zeroshard {

bool OpState::Complete(absl::Status status) {
  absl::MutexLock lock(&mu_);
  if (done_) return false;
  done_ = true;
  status_ = std::move(status);
  return true;
}

absl::Status OpState::Wait(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  if (!mu_.AwaitWithTimeout(absl::Condition(&done_), timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat("collective not complete after ", absl::FormatDuration(timeout)));
  }
  return status_;
}

std::unique_ptr<Work> CompletedWork(absl::Status status) {
  auto state = std::make_shared<OpState>();
  state->Complete(std::move(status));
  return std::make_unique<OpWork>(std::move(state));
}

OpQueue::OpQueue() : thread_([this] { Loop(); }) {}

OpQueue::~OpQueue() {
  FailAll(absl::AbortedError("communicator destroyed"));
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

std::unique_ptr<Work> OpQueue::Submit(CommOp op, int64_t bytes, Body body) {
  auto state = std::make_shared<OpState>();
  absl::MutexLock lock(&mu_);
  if (!failed_.ok()) {
    state->Complete(NameOp(op, failed_));
  } else {
    queue_.push_back(Item{op, bytes, absl::Now(), std::move(body), state});
  }
  return std::make_unique<OpWork>(std::move(state), op);
}

void OpQueue::FailAll(absl::Status status) {
  std::deque<Item> dropped;
  std::shared_ptr<OpState> running;
  CommOp running_op = CommOp::kCount;
  {
    absl::MutexLock lock(&mu_);
    if (failed_.ok()) failed_ = status;
    dropped.swap(queue_);
    running = running_;
    running_op = running_op_;
  }
  if (running) running->Complete(NameOp(running_op, status));
  for (auto& item : dropped) item.state->Complete(NameOp(item.op, status));
}

void OpQueue::Abort(absl::Status status) {
  {
    absl::MutexLock lock(&mu_);
    failed_ = status;
  }
  FailAll(std::move(status));
}

CommStats OpQueue::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void OpQueue::Loop() {
  for (;;) {
    Item item;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stop_ and nothing left.
      item = std::move(queue_.front());
      queue_.pop_front();
      running_ = item.state;
      running_op_ = item.op;
    }
    absl::Status status = item.body();
    const double seconds = absl::ToDoubleSeconds(absl::Now() - item.issued);
    {
      absl::MutexLock lock(&mu_);
      running_.reset();
      // A failed op leaves the communicator unusable (its pairs are closed),
      // as NCCL's asynchronous errors do: later ops fail with the same status.
      if (!status.ok() && failed_.ok()) failed_ = status;
      if (status.ok()) {
        CommOpStats& s = stats_.ops[static_cast<int>(item.op)];
        s.calls += 1;
        s.bytes += item.bytes;
        s.seconds += seconds;
      }
    }
    if (!status.ok()) FailAll(status);
    item.state->Complete(std::move(status));
  }
}

}  // namespace zeroshard
