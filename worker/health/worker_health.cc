#include "worker/health/worker_health.h"

namespace zeroshard {

WorkerHealth& WorkerHealth::Process() {
  static WorkerHealth* const health = new WorkerHealth();  // Never destroyed: threads read it.
  return *health;
}

void WorkerHealth::RecordContact(absl::Time now, bool in_running_generation) {
  last_contact_ns_.store(absl::ToUnixNanos(now));
  ready_.store(in_running_generation);
}

void WorkerHealth::RecordFailedContact() { ready_.store(false); }

void WorkerHealth::RecordSessionEnded() { ready_.store(false); }

bool WorkerHealth::Healthy(absl::Time now, absl::Duration max_age) const {
  const int64_t last = last_contact_ns_.load();
  if (last == kNever) return true;  // Not joined yet: joining has its own deadline.
  return now - absl::FromUnixNanos(last) <= max_age;
}

bool WorkerHealth::Ready() const { return ready_.load(); }

}  // namespace zeroshard
