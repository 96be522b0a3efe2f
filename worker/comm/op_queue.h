// OpQueue: runs a communicator's operations one at a time, in issue order, on
// one background thread, and hands out a Work handle per operation. Shared by
// the CPU backends; keeps threading out of the algorithm files (STYLE.md 21).
//
// [Note: completion wins once] An operation's handle completes exactly once:
// either when its body returns, or earlier when FailAll() fails it (Abort).
// A body that returns after FailAll() has its status dropped. The body may
// still be touching its buffers then, so after Abort the caller keeps the
// buffers of pending operations alive until the communicator is destroyed
// (the destructor joins the thread).
//
// Thread safety: Submit from one thread; FailAll and stats() from any thread.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"

namespace zeroshard {

// Completion state shared by the queue and a Work handle.
class OpState {
 public:
  // First call wins (see [Note: completion wins once]); returns whether it won.
  bool Complete(absl::Status status);
  // DEADLINE_EXCEEDED when not complete within timeout (the op keeps running).
  absl::Status Wait(absl::Duration timeout);

 private:
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

// A Work handle over an OpState.
class OpWork final : public Work {
 public:
  explicit OpWork(std::shared_ptr<OpState> state, CommOp op = CommOp::kCount)
      : state_(std::move(state)), op_(op) {}
  absl::Status Wait(absl::Duration timeout) override { return state_->Wait(timeout); }
  CommOp op() const override { return op_; }

 private:
  std::shared_ptr<OpState> state_;
  CommOp op_;
};

// A Work that is already complete with `status`.
std::unique_ptr<Work> CompletedWork(absl::Status status);

// In a function returning std::unique_ptr<Work>: returns CompletedWork of
// `expr`'s status when it is not OK (an argument check).
#define ZS_RETURN_WORK_IF_ERROR(expr)                                   \
  do {                                                                  \
    if (absl::Status zs_work_status_ = (expr); !zs_work_status_.ok()) { \
      return ::zeroshard::CompletedWork(std::move(zs_work_status_));    \
    }                                                                   \
  } while (0)

class OpQueue {
 public:
  using Body = std::function<absl::Status()>;
  OpQueue();
  // Fails what is still queued with ABORTED and joins the thread; the running
  // body must return by itself (the owner makes it, e.g. by closing pairs).
  ~OpQueue();
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;

  // Queues `body`; op/bytes are what stats() records when it succeeds. Its
  // seconds run from this call to the body's return.
  std::unique_ptr<Work> Submit(CommOp op, int64_t bytes, Body body);
  // Completes the running and every queued op with `status` now; later
  // Submits complete with it too (the first FailAll's status sticks). Each
  // op's status names the op first ("all_gather: communicator aborted",
  // NameOp), so a failure report says what the rank was in however the
  // caller waited.
  void FailAll(absl::Status status);
  // FailAll for the communicator's Abort: `status` (ABORTED) replaces an
  // earlier failure, so every later op fails with ABORTED, abseil's "retry
  // higher up" (the next generation), not with whatever ended the op the
  // abort interrupted (say its own DEADLINE_EXCEEDED, a race with the
  // caller's wait).
  void Abort(absl::Status status);
  CommStats stats() const;

 private:
  struct Item {
    CommOp op;
    int64_t bytes;
    absl::Time issued;
    Body body;
    std::shared_ptr<OpState> state;
  };
  void Loop();

  mutable absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<OpState> running_ ABSL_GUARDED_BY(mu_);
  CommOp running_op_ ABSL_GUARDED_BY(mu_) = CommOp::kCount;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  CommStats stats_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace zeroshard
