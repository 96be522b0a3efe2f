#include "server/kv/kv_store.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "server/kv/kv_owner.h"

namespace zeroshard::server {

std::string KvPrefix(const std::string& job_id, uint64_t generation) {
  return absl::StrCat(job_id, "/g", generation, "/");
}

absl::Status ValidateKey(const std::string& key, const char* field) {
  if (key.empty()) return absl::InvalidArgumentError(absl::StrCat(field, " is empty"));
  if (key.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is ", key.size(), " bytes; the limit is ", kMaxKeyBytes));
  }
  return absl::OkStatus();
}

void KvStore::Reset(const std::string& prefix) {
  prefix_ = prefix;
  values_.clear();
  owner_bytes_.clear();
  bytes_ = 0;
}

absl::Status KvStore::Set(const std::string& key, std::string value) {
  if (auto s = ValidateKey(key, "key"); !s.ok()) return s;
  if (value.size() > kMaxValueBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("value is ", value.size(), " bytes; the limit is ", kMaxValueBytes));
  }
  const std::string full = prefix_ + key;
  auto it = values_.find(full);
  const size_t old_bytes = it == values_.end() ? 0 : full.size() + it->second.size();
  const size_t new_bytes = full.size() + value.size();
  if (it == values_.end() && values_.size() >= kMaxKeys) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the generation's store holds ", kMaxKeys, " keys already"));
  }
  if (bytes_ - old_bytes + new_bytes > kMaxStoreBytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the generation's store would exceed ", kMaxStoreBytes, " bytes"));
  }
  const int owner = KvKeyOwner(key).value_or(-1);
  size_t& owned = owner_bytes_[owner];
  if (owned - old_bytes + new_bytes > owner_limit_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the keys of rank ", owner, " would exceed their share of the generation's store, ",
        owner_limit_, " bytes"));
  }
  owned = owned - old_bytes + new_bytes;
  bytes_ = bytes_ - old_bytes + new_bytes;
  values_[full] = std::move(value);
  return absl::OkStatus();
}

absl::StatusOr<std::string> KvStore::Get(const std::string& key) const {
  if (auto s = ValidateKey(key, "key"); !s.ok()) return s;
  auto it = values_.find(prefix_ + key);
  if (it == values_.end()) {
    return absl::NotFoundError(absl::StrCat("key \"", key, "\" is not set in ", prefix_));
  }
  return it->second;
}

bool KvStore::Has(const std::string& key) const { return values_.count(prefix_ + key) > 0; }

absl::StatusOr<int64_t> KvStore::Add(const std::string& key, int64_t delta) {
  if (auto s = ValidateKey(key, "key"); !s.ok()) return s;
  int64_t current = 0;
  auto it = values_.find(prefix_ + key);
  if (it != values_.end() && !absl::SimpleAtoi(it->second, &current)) {
    return absl::FailedPreconditionError(
        absl::StrCat("key \"", key, "\" holds a value that is not a decimal integer"));
  }
  int64_t sum = 0;
  if (__builtin_add_overflow(current, delta, &sum)) {
    return absl::OutOfRangeError(
        absl::StrCat("delta ", delta, " overflows the int64 at key \"", key, "\""));
  }
  if (auto s = Set(key, absl::StrCat(sum)); !s.ok()) return s;
  return sum;
}

}  // namespace zeroshard::server
