#include "worker/comm/gloo_store_adapter.h"

#include <utility>

#include "gloo/common/error.h"

namespace zeroshard {

GlooStoreAdapter::GlooStoreAdapter(zeroshard::Store& store, std::string prefix,
                                   absl::Duration timeout)
    : store_(store), prefix_(std::move(prefix)), timeout_(timeout) {}

void GlooStoreAdapter::Fail(absl::Status status) {
  {
    absl::MutexLock lock(&mu_);
    if (last_error_.ok()) last_error_ = status;
  }
  throw ::gloo::IoException(status.ToString());
}

void GlooStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  absl::Status s = store_.Set(prefix_ + key, std::vector<uint8_t>(data.begin(), data.end()));
  if (!s.ok()) Fail(std::move(s));
}

std::vector<char> GlooStoreAdapter::get(const std::string& key) {
  wait({key});
  auto value = store_.Get(prefix_ + key);
  if (!value.ok()) Fail(value.status());
  return std::vector<char>(value->begin(), value->end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys) {
  wait(keys, std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout_)));
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  std::vector<std::string> full;
  full.reserve(keys.size());
  for (const auto& k : keys) full.push_back(prefix_ + k);
  absl::Status s = store_.Wait(full, absl::Milliseconds(timeout.count()));
  if (!s.ok()) Fail(std::move(s));
}

absl::Status GlooStoreAdapter::last_error() const {
  absl::MutexLock lock(&mu_);
  return last_error_;
}

}  // namespace zeroshard
