// A zeroshard::Store (worker/comm/store.h) backed by the coordinator's
// rendezvous KV for one (job, generation): what the Gloo and NCCL
// communicators rendezvous through. Keys are relative to the generation's
// kv_prefix; the coordinator drops them when the generation ends, after
// which every call fails with FAILED_PRECONDITION naming the current
// generation (the caller should tear down and move to the new one).
//
// Errors pass through from CoordinatorClient: UNAVAILABLE if the
// coordinator is unreachable, NOT_FOUND from Get for an absent key,
// DEADLINE_EXCEEDED from Wait. Wait with a timeout above the coordinator's
// 600 s limit waits in several calls.
//
// Thread safety: safe to call from several threads (the client is).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/rpc/coordinator_client.h"
#include "worker/comm/store.h"

namespace zeroshard {

class CoordinatorStore final : public Store {
 public:
  CoordinatorStore(std::shared_ptr<CoordinatorClient> client, std::string job_id,
                   uint64_t generation);

  absl::Status Set(const std::string& key, const std::vector<uint8_t>& value) override;
  absl::StatusOr<std::vector<uint8_t>> Get(const std::string& key) override;
  absl::Status Wait(const std::vector<std::string>& keys, absl::Duration timeout) override;
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override;

  uint64_t generation() const { return generation_; }

 private:
  std::shared_ptr<CoordinatorClient> client_;
  const std::string job_id_;
  const uint64_t generation_;
};

}  // namespace zeroshard
