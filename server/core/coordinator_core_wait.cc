// KvWait on CoordinatorCore: waits parked in KvWaiters, never a thread each.
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "server/core/coordinator_core.h"
#include "server/core/validation.h"

namespace zeroshard::server {
namespace {

absl::Status ValidateWait(const v1::KvWaitRequest& r) {
  if (r.keys_size() == 0) return absl::InvalidArgumentError("keys is empty");
  if (r.keys_size() > kMaxWaitKeys) {
    return absl::InvalidArgumentError(
        absl::StrCat("keys has ", r.keys_size(), " entries; the limit is ", kMaxWaitKeys));
  }
  for (int i = 0; i < r.keys_size(); ++i) {
    ZS_RETURN_IF_ERROR(ValidateKey(r.keys(i), absl::StrCat("keys[", i, "]").c_str()));
  }
  return CheckBetween(r.timeout_ms(), 1, kMaxWaitMs, "timeout_ms");
}

}  // namespace

void CoordinatorCore::EndWaitsLocked(const absl::Status& why) {
  waiters_.FinishAll(why.ok() ? absl::AbortedError("the generation changed") : why);
  UpdateGaugesLocked();
}

absl::StatusOr<uint64_t> CoordinatorCore::StartKvWait(const v1::KvWaitRequest& r,
                                                      const std::string& caller, KvWaitDone done) {
  ZS_RETURN_IF_ERROR(ValidateWait(r));
  absl::MutexLock lock(&mu_);
  ZS_RETURN_IF_ERROR(CheckKvRequestLocked(r.job_id(), r.generation()));
  std::set<std::string> missing;
  for (const std::string& key : r.keys()) {
    if (!kv_.Has(key)) missing.insert(kv_.prefix() + key);
  }
  if (missing.empty()) {
    done(absl::OkStatus());
    return 0;
  }
  absl::StatusOr<uint64_t> id =
      waiters_.Add(caller, std::move(missing), clock_->Now() + absl::Milliseconds(r.timeout_ms()),
                   absl::StrCat(r.timeout_ms(), " ms"), std::move(done));
  UpdateGaugesLocked();  // zeroshard_kv_waits_parked
  return id;
}

void CoordinatorCore::CancelKvWait(uint64_t id) {
  absl::MutexLock lock(&mu_);
  waiters_.Finish(id, absl::CancelledError("KvWait: the client cancelled"));
  UpdateGaugesLocked();
}

size_t CoordinatorCore::parked_kv_waits() const {
  absl::MutexLock lock(&mu_);
  return waiters_.size();
}

absl::Status CoordinatorCore::KvWait(const v1::KvWaitRequest& r) {
  struct Outcome {
    absl::Notification done;
    absl::Status status;
  };
  auto outcome = std::make_shared<Outcome>();
  ZS_ASSIGN_OR_RETURN(uint64_t id, StartKvWait(r, "in-process", [outcome](absl::Status s) {
                        outcome->status = std::move(s);
                        outcome->done.Notify();
                      }));
  // Real time as well as the core's clock (a FakeClock in tests never
  // reaches the deadline unless ticked).
  if (!outcome->done.WaitForNotificationWithTimeout(absl::Milliseconds(r.timeout_ms()))) {
    absl::MutexLock lock(&mu_);
    waiters_.TimeOut(id);
    UpdateGaugesLocked();
  }
  outcome->done.WaitForNotification();
  return outcome->status;
}

}  // namespace zeroshard::server
