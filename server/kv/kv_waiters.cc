#include "server/kv/kv_waiters.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace zeroshard::server {
namespace {

template <typename M, typename K>
void EraseEntry(M& index, const K& key, uint64_t id) {
  auto [first, last] = index.equal_range(key);
  for (auto it = first; it != last; ++it) {
    if (it->second == id) {
      index.erase(it);
      return;
    }
  }
}

}  // namespace

absl::StatusOr<uint64_t> KvWaiters::Add(const std::string& caller, std::set<std::string> missing,
                                        absl::Time deadline, std::string shown, KvWaitDone done) {
  if (static_cast<int>(waiters_.size()) >= max_total_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("KvWait: ", waiters_.size(), " waits are parked; the coordinator's limit is ",
                     max_total_, " (--max-kv-waits)"));
  }
  int& mine = per_caller_[caller];
  if (mine >= max_per_caller_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "KvWait: caller ", caller, " has ", mine, " waits parked; the per-caller limit is ",
        max_per_caller_, " (--max-kv-waits-per-caller)"));
  }
  ++mine;
  const uint64_t id = next_id_++;
  for (const std::string& key : missing) by_key_.emplace(key, id);
  by_deadline_.emplace(deadline, id);
  waiters_.emplace(id,
                   Waiter{caller, std::move(missing), deadline, std::move(shown), std::move(done)});
  return id;
}

void KvWaiters::Remove(std::map<uint64_t, Waiter>::iterator it, const absl::Status& status) {
  Waiter w = std::move(it->second);
  const uint64_t id = it->first;
  waiters_.erase(it);
  for (const std::string& key : w.missing) EraseEntry(by_key_, key, id);
  EraseEntry(by_deadline_, w.deadline, id);
  if (auto c = per_caller_.find(w.caller); c != per_caller_.end() && --c->second <= 0) {
    per_caller_.erase(c);
  }
  w.done(status);
}

void KvWaiters::KeySet(const std::string& key) {
  std::vector<uint64_t> ready;
  auto [first, last] = by_key_.equal_range(key);
  for (auto it = first; it != last;) {
    Waiter& w = waiters_.at(it->second);
    w.missing.erase(key);
    if (w.missing.empty()) ready.push_back(it->second);
    it = by_key_.erase(it);
  }
  for (uint64_t id : ready) Remove(waiters_.find(id), absl::OkStatus());
}

void KvWaiters::RemoveTimedOut(std::map<uint64_t, Waiter>::iterator it) {
  const std::string missing = *it->second.missing.begin();
  Remove(it, absl::DeadlineExceededError(
                 absl::StrCat("key \"", missing, "\" not set within ", it->second.shown)));
}

void KvWaiters::Expire(absl::Time now) {
  while (!by_deadline_.empty() && by_deadline_.begin()->first <= now) {
    RemoveTimedOut(waiters_.find(by_deadline_.begin()->second));
  }
}

bool KvWaiters::TimeOut(uint64_t id) {
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return false;
  RemoveTimedOut(it);
  return true;
}

bool KvWaiters::Finish(uint64_t id, const absl::Status& status) {
  auto it = waiters_.find(id);
  if (it == waiters_.end()) return false;
  Remove(it, status);
  return true;
}

void KvWaiters::FinishAll(const absl::Status& status) {
  while (!waiters_.empty()) Remove(waiters_.begin(), status);
}

int KvWaiters::parked_by(const std::string& caller) const {
  auto it = per_caller_.find(caller);
  return it == per_caller_.end() ? 0 : it->second;
}

}  // namespace zeroshard::server
