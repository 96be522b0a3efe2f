#include "worker/engine/collective_tracker.h"

#include <algorithm>

#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "worker/comm/wait_or_abort.h"

namespace zeroshard {

void CollectiveTracker::Fail(const absl::Status& status) {
  if (status_.ok() && !status.ok()) status_ = status;
}

absl::Status CollectiveTracker::Await(std::unique_ptr<Work>& work) {
  ZS_CHECK(work != nullptr);
  absl::Status s = WaitOrAbort(*comm_, *work, timeout_);
  work.reset();
  Fail(s);
  return s;
}

absl::Status CollectiveTracker::Sequence(std::unique_ptr<Work>& work) {
  ZS_CHECK(work != nullptr);
  absl::Status s = work->CompleteOnStream();
  if (absl::IsUnimplemented(s)) return Await(work);
  if (!s.ok()) {
    // It never made it onto the stream: the generation is broken.
    comm_->Abort();
    work.reset();
    Fail(s);
    return s;
  }
  in_flight_.push_back(std::move(work));
  return absl::OkStatus();
}

absl::Status CollectiveTracker::AwaitInFlight() {
  const absl::Time deadline = absl::Now() + timeout_;
  for (std::unique_ptr<Work>& work : in_flight_) {
    if (!failed()) {
      Fail(WaitOrAbort(*comm_, *work, std::max(deadline - absl::Now(), absl::ZeroDuration())));
    }
    work.reset();  // After Abort a Work fails fast and holds no buffer.
  }
  in_flight_.clear();
  return status_;
}

bool SettleWork(std::unique_ptr<Work>& work, absl::Duration wait) {
  const bool ok = work == nullptr || work->Wait(wait).ok();
  work.reset();
  return ok;
}

bool CollectiveTracker::SettleInFlight(absl::Duration wait) {
  bool all = true;
  for (std::unique_ptr<Work>& work : in_flight_) all = SettleWork(work, wait) && all;
  in_flight_.clear();
  return all;
}

void CollectiveTracker::Retire(DeviceBuffer& buffer) {
  DeviceBuffer empty(buffer.device(), buffer.accountant(), buffer.kind());
  retired_.push_back(std::move(buffer));
  buffer = std::move(empty);
}

absl::Status CollectiveTracker::FinishEach(std::vector<IssuedWork>& issued, bool sequence) {
  for (IssuedWork& w : issued) {
    absl::Status s = sequence ? Sequence(w.work) : Await(w.work);
    if (s.ok()) continue;
    Retire(*w.into);  // [Note: failed collective buffers]
    AbandonIssued(issued, s);
    return s;
  }
  issued.clear();
  return absl::OkStatus();
}

absl::Status CollectiveTracker::AwaitEach(std::vector<IssuedWork>& issued) {
  return FinishEach(issued, /*sequence=*/false);
}

absl::Status CollectiveTracker::SequenceEach(std::vector<IssuedWork>& issued) {
  return FinishEach(issued, /*sequence=*/true);
}

void CollectiveTracker::AbandonIssued(std::vector<IssuedWork>& issued, const absl::Status& cause) {
  bool any = false;
  for (IssuedWork& w : issued) {
    if (w.work == nullptr) continue;
    any = true;
    Retire(*w.into);  // [Note: failed collective buffers]
  }
  if (any) {
    comm_->Abort();
    Fail(cause);
  }
  issued.clear();
}

void CollectiveTracker::AbandonRetired() {
  for (DeviceBuffer& b : retired_) KeepForever(b.Abandon());
  retired_.clear();
}

}  // namespace zeroshard
