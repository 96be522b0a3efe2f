#include "worker/rendezvous/coordinator_store.h"

#include <algorithm>

namespace zeroshard {
namespace {

// The coordinator's per-call KvWait limit (coordinator.proto).
constexpr absl::Duration kMaxWaitPerCall = absl::Seconds(600);

}  // namespace

CoordinatorStore::CoordinatorStore(std::shared_ptr<CoordinatorClient> client, std::string job_id,
                                   uint64_t generation)
    : client_(std::move(client)), job_id_(std::move(job_id)), generation_(generation) {}

absl::Status CoordinatorStore::Set(const std::string& key, const std::vector<uint8_t>& value) {
  v1::KvSetRequest request;
  request.set_job_id(job_id_);
  request.set_generation(generation_);
  request.set_key(key);
  request.set_value(std::string(value.begin(), value.end()));
  return client_->KvSet(request);
}

absl::StatusOr<std::vector<uint8_t>> CoordinatorStore::Get(const std::string& key) {
  v1::KvGetRequest request;
  request.set_job_id(job_id_);
  request.set_generation(generation_);
  request.set_key(key);
  absl::StatusOr<std::string> value = client_->KvGet(request);
  if (!value.ok()) return value.status();
  return std::vector<uint8_t>(value->begin(), value->end());
}

absl::Status CoordinatorStore::Wait(const std::vector<std::string>& keys, absl::Duration timeout) {
  if (keys.empty()) return absl::OkStatus();
  if (timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("Wait timeout must be positive");
  }
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    v1::KvWaitRequest request;
    request.set_job_id(job_id_);
    request.set_generation(generation_);
    for (const std::string& k : keys) request.add_keys(k);
    request.set_timeout_ms(
        std::max<int64_t>(1, absl::ToInt64Milliseconds(std::min(left, kMaxWaitPerCall))));
    absl::Status s = client_->KvWait(request);
    if (!absl::IsDeadlineExceeded(s) || absl::Now() >= deadline) return s;
  }
}

absl::StatusOr<int64_t> CoordinatorStore::Add(const std::string& key, int64_t delta) {
  v1::KvAddRequest request;
  request.set_job_id(job_id_);
  request.set_generation(generation_);
  request.set_key(key);
  request.set_delta(delta);
  return client_->KvAdd(request);
}

}  // namespace zeroshard
