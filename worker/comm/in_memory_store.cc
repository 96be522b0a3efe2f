#include "worker/comm/in_memory_store.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace zeroshard {

absl::Status InMemoryStore::Set(const std::string& key, const std::vector<uint8_t>& value) {
  absl::MutexLock lock(&mu_);
  values_[key] = value;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint8_t>> InMemoryStore::Get(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = values_.find(key);
  if (it == values_.end()) return absl::NotFoundError(absl::StrCat("store key not found: ", key));
  return it->second;
}

absl::Status InMemoryStore::Wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  auto all_present = [this, &keys]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const auto& k : keys) {
      if (values_.find(k) == values_.end()) return false;
    }
    return true;
  };
  absl::MutexLock lock(&mu_);
  if (mu_.AwaitWithTimeout(absl::Condition(&all_present), timeout)) return absl::OkStatus();
  for (const auto& k : keys) {
    if (values_.find(k) == values_.end()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "store wait timed out after ", absl::FormatDuration(timeout), "; missing key: ", k));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> InMemoryStore::Add(const std::string& key, int64_t delta) {
  absl::MutexLock lock(&mu_);
  int64_t current = 0;
  auto it = values_.find(key);
  if (it != values_.end()) {
    const std::string text(it->second.begin(), it->second.end());
    if (!absl::SimpleAtoi(text, &current)) {
      return absl::InvalidArgumentError(absl::StrCat("store key ", key, " is not an integer"));
    }
  }
  current += delta;
  const std::string text = absl::StrCat(current);
  values_[key] = std::vector<uint8_t>(text.begin(), text.end());
  return current;
}

}  // namespace zeroshard
