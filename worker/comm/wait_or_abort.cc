#include "worker/comm/wait_or_abort.h"

#include <vector>

#include "absl/base/const_init.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace zeroshard {
namespace {

absl::Mutex graveyard_mu(absl::kConstInit);

// Never destroyed: what it holds must outlive every backend thread.
std::vector<std::shared_ptr<void>>& Graveyard() ABSL_EXCLUSIVE_LOCKS_REQUIRED(graveyard_mu) {
  static auto* graveyard = new std::vector<std::shared_ptr<void>>();
  return *graveyard;
}

}  // namespace

absl::Status WaitOrAbort(Communicator& comm, Work& work, absl::Duration timeout) {
  absl::Status s = work.Wait(timeout);
  if (s.ok()) return s;
  comm.Abort();
  // The operation first: a failure report then names what the rank was in.
  return NameOp(work.op(), s);
}

void KeepForever(void* buffer) {
  if (buffer == nullptr) return;
  // A no-op deleter: the pointer is only kept reachable.
  KeepForever(std::shared_ptr<void>(buffer, [](void*) {}));
}

void KeepForever(std::shared_ptr<void> buffer) {
  if (buffer == nullptr) return;
  absl::MutexLock lock(&graveyard_mu);
  Graveyard().push_back(std::move(buffer));
}

}  // namespace zeroshard
