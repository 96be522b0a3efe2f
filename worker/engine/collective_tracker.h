// The engine's collectives after they are issued: where the host waits for
// them, which ones complete on the device stream, and what happens to their
// buffers when one fails. Every part of the engine (gather scheduler,
// gradient reducer, shard updater) orders its collectives through one
// tracker, which keeps the first error.
//
// - Await: a host wait (bounded by the collective timeout). A failed wait
//   aborts the communicator (wait_or_abort.h).
// - Sequence: on the device stream where the backend can ([Note:
//   stream-ordered collectives], communicator.h): the Work joins the
//   in-flight list; a host wait otherwise.
// - AwaitInFlight: every stream-ordered Work, one deadline for all, before
//   the host reads a value or state crosses to the host.
// - [Note: failed collective buffers] A backend may still write into the
//   buffers of an op whose wait failed: Retire moves such a buffer here and
//   leaves an empty one in its place; AbandonRetired (at the engine's end)
//   hands them to KeepForever, never freeing them.
//
// Errors cannot be returned by a hook: the first one is kept (status()),
// and the engine stops issuing collectives once failed().
//
// Thread safety: the engine's training thread only.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "worker/comm/communicator.h"
#include "worker/device/device_buffer.h"

namespace zeroshard {

// Teardown: waits up to `wait` for `work` (if any) and drops it; false if
// it did not finish well.
bool SettleWork(std::unique_ptr<Work>& work, absl::Duration wait);

// A collective issued and not yet waited, with the buffer it writes into.
struct IssuedWork {
  std::unique_ptr<Work> work;
  DeviceBuffer* into = nullptr;
};

class CollectiveTracker {
 public:
  CollectiveTracker(Communicator* comm, absl::Duration timeout) : comm_(comm), timeout_(timeout) {}

  // Keeps `status` as the first error (OK is ignored).
  void Fail(const absl::Status& status);
  bool failed() const { return !status_.ok(); }
  const absl::Status& status() const { return status_; }

  absl::Status Await(std::unique_ptr<Work>& work);
  absl::Status Sequence(std::unique_ptr<Work>& work);
  // Await or Sequence each of `issued` in order. At the first error its
  // buffer and those of the works after it go through AbandonIssued, and
  // the error is returned. `issued` is empty after either.
  absl::Status AwaitEach(std::vector<IssuedWork>& issued);
  absl::Status SequenceEach(std::vector<IssuedWork>& issued);
  // The first error of any stream-ordered Work (it aborts the communicator
  // and becomes status()), or status().
  absl::Status AwaitInFlight();
  // Waits up to `wait` for every stream-ordered Work; false if one did not
  // finish (teardown).
  bool SettleInFlight(absl::Duration wait);

  // Replaces `buffer` by an empty one of its kind; the old one is kept.
  void Retire(DeviceBuffer& buffer);
  // An early return for `cause` while `issued` are not yet waited: the
  // communicator is aborted, so nothing more arrives, the buffer of each
  // is retired (the queue may still be inside one of the ops), the works
  // are dropped and `cause` becomes the first error if none was kept
  // (teardown then waits briefly, as after any failure). Null works
  // (already waited) are skipped with their buffers; with none left this
  // does nothing.
  void AbandonIssued(std::vector<IssuedWork>& issued, const absl::Status& cause);
  void Keep(DeviceBuffer buffer) { retired_.push_back(std::move(buffer)); }
  // Teardown: every retired buffer to KeepForever (wait_or_abort.h).
  void AbandonRetired();

 private:
  absl::Status FinishEach(std::vector<IssuedWork>& issued, bool sequence);

  Communicator* comm_;
  absl::Duration timeout_;
  absl::Status status_;
  // Stream-ordered collectives not yet waited; their buffers may already be
  // freed (stream-ordered, so not reused before the op is done).
  std::vector<std::unique_ptr<Work>> in_flight_;
  std::vector<DeviceBuffer> retired_;
};

}  // namespace zeroshard
