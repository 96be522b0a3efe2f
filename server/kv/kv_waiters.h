// Parked KvWaits of the running generation, indexed by key: a Set wakes only
// the waiters of that key, and no wait holds a thread while it is parked
// (the gRPC adapter runs KvWait on the asynchronous API,
// server/rpc/kv_wait_calls.h; issue 16).
//
// How it works: a waiter is the set of its keys still missing, a deadline
// and a `done` callback. by_key_ maps each missing key to its waiters, so
// Set(key) touches only those; by_deadline_ orders waiters by deadline, so
// Expire(now) touches only the expired ones. Every waiter finishes exactly
// once: all keys present (OK), deadline (DEADLINE_EXCEEDED naming a missing
// key), Finish (cancel, generation end, shutdown: the caller's status).
//
// Limits: at most `max_per_caller` parked waits per caller (a peer host,
// from the adapter) and `max_total` in all; Add beyond them is
// RESOURCE_EXHAUSTED naming the limit.
//
// Thread safety: not thread-safe; CoordinatorCore serialises access. `done`
// runs inside these calls, so under the core's lock: it must only hand the
// outcome off (set a notification, queue a reply), never call the core.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace zeroshard::server {

using KvWaitDone = std::function<void(absl::Status)>;

class KvWaiters {
 public:
  KvWaiters(int max_per_caller, int max_total)
      : max_per_caller_(max_per_caller), max_total_(max_total) {}

  // Parks a wait for `missing` (full keys, non-empty) until `deadline`;
  // `shown` names the keys in messages. Returns its id (> 0).
  // RESOURCE_EXHAUSTED naming the limit when the caller or the store is full.
  absl::StatusOr<uint64_t> Add(const std::string& caller, std::set<std::string> missing,
                               absl::Time deadline, std::string shown, KvWaitDone done);
  // `key` was set: finishes (OK) the waiters that now have every key.
  void KeySet(const std::string& key);
  // Finishes every waiter whose deadline is at or before `now`.
  void Expire(absl::Time now);
  // Finishes waiter `id` as Expire would (DEADLINE_EXCEEDED naming a
  // missing key), whatever its deadline; false if it already finished.
  bool TimeOut(uint64_t id);
  // Finishes waiter `id` with `status`; false if it already finished.
  bool Finish(uint64_t id, const absl::Status& status);
  // Finishes every waiter with `status` (generation end, shutdown).
  void FinishAll(const absl::Status& status);

  size_t size() const { return waiters_.size(); }
  int parked_by(const std::string& caller) const;

 private:
  struct Waiter {
    std::string caller;
    std::set<std::string> missing;
    absl::Time deadline;
    std::string shown;
    KvWaitDone done;
  };
  void Remove(std::map<uint64_t, Waiter>::iterator it, const absl::Status& status);
  void RemoveTimedOut(std::map<uint64_t, Waiter>::iterator it);

  const int max_per_caller_;
  const int max_total_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Waiter> waiters_;
  std::multimap<std::string, uint64_t> by_key_;
  std::multimap<absl::Time, uint64_t> by_deadline_;
  std::map<std::string, int> per_caller_;
};

}  // namespace zeroshard::server
